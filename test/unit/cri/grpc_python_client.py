#!/usr/bin/python3
"""An independent gRPC client (Debian's python3-grpcio, the C core of gRPC)
against the project's gRPC server (cri/grpc_server.c) in grpc_serve: raw bytes
through grpc's generic callables, so no generated code is needed.

    grpc_python_client.py PATH/TO/grpc_serve
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}", file=sys.stderr)


def rpc_error(fn):
    try:
        fn()
    except grpc.RpcError as e:
        return e
    return None


def main():
    serve = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="nl-grpc-py-")
    sock = os.path.join(tmp, "plugins", "kubelet.sock")
    # A cross build's server runs under its emulator (tools/cross-test.sh).
    wrapper = os.environ.get("MESON_EXE_WRAPPER", "").split()
    proc = subprocess.Popen(wrapper + [serve, sock])
    try:
        for _ in range(500):
            if os.path.exists(sock):
                break
            time.sleep(0.01)
        check("socket mode", os.stat(sock).st_mode & 0o777 == 0o600, oct(os.stat(sock).st_mode))
        ch = grpc.insecure_channel("unix:" + sock)
        echo = ch.unary_unary("/x.Y/Echo")

        check("unary", echo(b"hello", timeout=5) == b"hello")
        check("empty message", echo(b"", timeout=5) == b"")
        big = bytes(range(256)) * 4096  # 1 MiB: several windows and frames
        check("1 MiB message", echo(big, timeout=10) == big)

        futures = [echo.future(b"call %d" % i, timeout=10) for i in range(100)]
        check("100 concurrent calls",
              [f.result() for f in futures] == [b"call %d" % i for i in range(100)])

        e = rpc_error(lambda: echo(b"x" * (5 << 20), timeout=10))
        check("oversize: RESOURCE_EXHAUSTED",
              e is not None and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED,
              e and (e.code(), e.details()))
        check("oversize: message", e is not None and
              e.details() == "grpc: received message larger than max (5242880 vs. 4194304)",
              e and e.details())

        e = rpc_error(lambda: ch.unary_unary("/x.Y/Nope")(b"", timeout=5))
        check("unknown method", e is not None and e.code() == grpc.StatusCode.UNIMPLEMENTED and
              e.details() == "unknown method Nope for service x.Y", e and e.details())
        e = rpc_error(lambda: ch.unary_unary("/a.B/C")(b"", timeout=5))
        check("unknown service", e is not None and e.code() == grpc.StatusCode.UNIMPLEMENTED and
              e.details() == "unknown service a.B", e and e.details())

        e = rpc_error(lambda: ch.unary_unary("/x.Y/Fail")(b"", timeout=5))
        check("error status", e is not None and e.code() == grpc.StatusCode.NOT_FOUND and
              e.details() == 'no such thing: café 100% "x"\n', e and e.details())

        t0 = time.monotonic()
        e = rpc_error(lambda: ch.unary_unary("/x.Y/Hold")(b"", timeout=0.3))
        took = time.monotonic() - t0
        check("deadline", e is not None and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED,
              e and e.code())
        check("deadline in time", 0.25 < took < 3, took)

        got = list(ch.unary_stream("/x.Y/Count")(b"\x05", timeout=5))
        check("server streaming", got == [b"0", b"1", b"2", b"3", b"4"], got)
        got = list(ch.unary_stream("/x.Y/Count")(b"\x00", timeout=5))
        check("server streaming, no message", got == [], got)

        # A call still held when the server stops: the client hears of it.
        held = ch.unary_unary("/x.Y/Hold").future(b"", timeout=10)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        e = rpc_error(held.result)
        check("stop with a call in flight", e is not None and
              e.code() == grpc.StatusCode.UNAVAILABLE, e and (e.code(), e.details()))
        check("clean exit", proc.wait(timeout=10) == 0, proc.returncode)
        check("socket removed", not os.path.exists(sock))
        ch.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
