# shellcheck shell=bash
# Shared by test/e2e/hostile_floods.sh and tools/bench/hostile_bench.sh.
# hostile_config FILE CA: a configuration whose kubelet server trusts client
# certificates signed by CA and nothing else (no webhook: the agent runs
# without an API server; an attacker without credentials is refused the same).
hostile_config() {
  cat >"$1" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  x509: {clientCAFile: $2}
  webhook: {enabled: false}
  anonymous: {enabled: false}
authorization: {mode: AlwaysAllow}
EOF
}
