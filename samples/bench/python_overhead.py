#!/usr/bin/env python3
"""What the Python binding adds per tensor, against the same work driven from C.

The workload is wsync-host-overhead's (samples/bench/host_overhead.c): one process, a sender on the
main thread and a receiver on a second thread that registers a buffer for every tensor, N tiny
tensors (fp32[4], unique names) sent in one batch over UCX on loopback and committed as one
version. Here the same program is written with the Python package (numpy buffers; the receiver
builds a TensorView per tensor of its event). Each program runs as its own process for N1 and N2
tensors; (wall(N2) - wall(N1)) / (N2 - N1) is the time per tensor with the fixed costs (process
start, imports, plugins, store, UCX) removed. Best of --repeat runs.

  python_overhead.py [--c BUILD/bin/wsync-host-overhead] [--n1 2000] [--n2 12000] [--repeat 3]

Prints a table and `python_over_c: <ratio>`. Run with a Python that imports wsync and numpy.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time


def worker(n):
    """The Python program: the C harness's workload, in one process."""
    import numpy as np
    import wsync
    names = ["model.layers.%d.tensor.weight" % i for i in range(n)]
    addr_file = os.path.join(tempfile.gettempdir(), "wsync-py-overhead-%d.addr" % os.getpid())
    status = {}

    def receive():
        while not (os.path.exists(addr_file) and open(addr_file).read().strip()):
            time.sleep(0.001)
        with wsync.Receiver(1, open(addr_file).read().strip(), group_name="overhead", timeout_ms=60000) as rx:
            rx.register({name: np.zeros(4, dtype=np.float32) for name in names})
            for ev in rx.events():
                if ev.kind == wsync.EventKind.COMMIT:
                    rx.commit(ev.version)
            status["ok"] = True

    th = threading.Thread(target=receive)
    th.start()
    data = np.zeros((n, 4), dtype=np.float32)
    with wsync.Group(1, group_name="overhead", store_addr="127.0.0.1:0", transport="ucx",
                     options={"store_addr_file": addr_file, "timeout_ms": "60000"}) as g:
        g.send({name: data[i] for i, name in enumerate(names)})
        g.finalize(1)
    th.join()
    os.unlink(addr_file)
    return 0 if status.get("ok") else 1


def wall(cmd, repeat):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--c", default=os.path.join(os.path.dirname(__file__), "../../build/bin/wsync-host-overhead"))
    ap.add_argument("--n1", type=int, default=2000)
    ap.add_argument("--n2", type=int, default=12000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return worker(args.worker)
    rows = []
    for label, cmd in (("C (wsync-host-overhead)", [args.c, "--transport", "ucx", "--tensors"]),
                       ("Python (this program)", [sys.executable, __file__, "--worker"])):
        w1 = wall(cmd + [str(args.n1)], args.repeat)
        w2 = wall(cmd + [str(args.n2)], args.repeat)
        rows.append((label, w1, w2, (w2 - w1) / (args.n2 - args.n1) * 1e6))
    print("| driver | wall N=%d (s) | wall N=%d (s) | per tensor (us) |" % (args.n1, args.n2))
    print("| --- | --- | --- | --- |")
    for label, w1, w2, per in rows:
        print("| %s | %.3f | %.3f | %.1f |" % (label, w1, w2, per))
    print("python_over_c: %.2f" % (rows[1][3] / rows[0][3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
