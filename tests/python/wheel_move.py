#!/usr/bin/env python3
"""A sender and a receiver process moving a small "model" over UCX with the installed wsync, no numpy
or torch: bytearrays in, every tensor's SHA-256 compared for each version. Both name the same
secret_file and nothing else (the sender writes it, 0600, the receiver reads it).

  wheel_move.py DIR           (runs both; exit 0 when every version arrived equal and committed)
  wheel_move.py DIR receiver  (the receiver alone; the first form starts it)

WSYNC_TEST_TRANSPORT picks the transport (default ucx); WSYNC_TEST_LAUNCHER is put before the
receiver's command line (python.wheel_aarch64: "qemu-aarch64 -L ROOT", the kernel here cannot run
an arm64 python by itself).
"""
import hashlib
import os
import subprocess
import sys
import time

import wsync

SIZES = {"embed.weight": 3 << 20, "layers.0.attn.weight": 1 << 20, "layers.0.mlp.weight": (5 << 20) + 3,
         "norm.weight": 4096}
VERSIONS = 3


def content(name, version):
    seed = hashlib.sha256(("%s/%d" % (name, version)).encode()).digest()
    n = SIZES[name]
    return bytearray((seed * (n // len(seed) + 1))[:n])


def receiver(d):
    store = os.path.join(d, "store")
    until = time.time() + 60
    while not (os.path.exists(store) and open(store).read().strip()):
        if time.time() > until:
            raise SystemExit("receiver: no store address")
        time.sleep(0.02)
    bufs = {n: bytearray(s) for n, s in SIZES.items()}
    opts = {"secret_file": os.path.join(d, "secret")}
    with wsync.Receiver(1, open(store).read().strip(), group_name="wheel", options=opts) as rx:
        rx.register(bufs)
        for ev in rx.events(60000):
            if ev.kind == wsync.EventKind.COMMIT:
                bad = [n for n in SIZES if hashlib.sha256(bufs[n]).digest() !=
                       hashlib.sha256(content(n, ev.version)).digest()]
                if bad:
                    raise SystemExit("receiver: version %d: wrong bytes in %s" % (ev.version, bad))
                rx.commit(ev.version)
                print("receiver: version %d: %d tensors equal (sha256), committed" % (ev.version, len(SIZES)),
                      flush=True)
        if rx.committed_version != VERSIONS:
            raise SystemExit("receiver: ended at version %d" % rx.committed_version)
    return 0


def main():
    d = sys.argv[1]
    if len(sys.argv) > 2:
        return receiver(d)
    for k in ("WSYNC_GROUP_SECRET", "WSYNC_GROUP_SECRET_FILE"):
        os.environ.pop(k, None)  # the secret file alone
    launcher = os.environ.get("WSYNC_TEST_LAUNCHER", "").split()
    rx = subprocess.Popen(launcher + [sys.executable, __file__, d, "receiver"])
    opts = {"store_addr_file": os.path.join(d, "store"), "secret_file": os.path.join(d, "secret"),
            "bucket_bytes": str(2 << 20)}
    transport = os.environ.get("WSYNC_TEST_TRANSPORT", "ucx")
    with wsync.Group(1, group_name="wheel", store_addr="127.0.0.1:0", transport=transport, options=opts) as g:
        for v in range(1, VERSIONS + 1):
            g.send({n: content(n, v) for n in SIZES})
            g.finalize(v)
            print("sender: version %d committed by the receiver" % v, flush=True)
    rc = rx.wait(60)
    mode = oct(os.stat(os.path.join(d, "secret")).st_mode & 0o777)
    print("wheel_move: %s over %s (secret file %s)" % ("OK" if rc == 0 else "FAILED", transport, mode))
    return rc


if __name__ == "__main__":
    sys.exit(main())
