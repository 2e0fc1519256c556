// etcd for the test control plane: the same entry point as etcd's own main
// package, built from the server module that k8s.io/kubernetes pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
