#!/usr/bin/env python3
"""wsync sample engine (Python): one engine worker holding a torch model. It registers the model's
parameters so the bytes land in place, and before it commits a version it checks every
parameter's checksum against the weights the trainer publishes for that version.

  engine.py --rank 1 --store-file /tmp/wsync-store
"""
import argparse
import pathlib
import sys
import time

import wsync
from model import build, checksums


def read_store(path, timeout_s=60):
    until = time.time() + timeout_s
    while time.time() < until:
        p = pathlib.Path(path)
        if p.exists() and p.read_text().strip():
            return p.read_text().strip()
        time.sleep(0.05)
    raise SystemExit("engine: no store address in %s after %d s" % (path, timeout_s))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--store-file", required=True)
    args = ap.parse_args()

    model = build(0)
    params = dict(model.named_parameters())
    pointers = {n: p.data_ptr() for n, p in params.items()}
    with wsync.Receiver(args.rank, read_store(args.store_file), group_name="python-sample") as rx:
        rx.register(model.named_parameters())  # zero-copy: the transport writes into these
        arrived = set()
        for ev in rx.events():
            if ev.kind == wsync.EventKind.BUCKET:
                for t in ev.tensors:
                    if not t.placed:
                        print("engine %d: FAILED: '%s' was not placed in the model" % (args.rank, t.name))
                        return 1
                    arrived.add(t.name)
            elif ev.kind == wsync.EventKind.COMMIT:
                want = checksums(build(ev.version).named_parameters())
                have = checksums(params.items())
                bad = sorted(n for n in want if have.get(n) != want[n]) + sorted(set(want) - arrived)
                moved = [n for n in params if params[n].data_ptr() != pointers[n]]
                if bad or moved:
                    print("engine %d: FAILED at version %d: wrong %s, moved %s" % (args.rank, ev.version, bad, moved))
                    return 1
                rx.commit(ev.version)
                print("engine %d: version %d verified (%d tensors, in place) and committed" % (
                    args.rank, ev.version, len(want)), flush=True)
                arrived = set()
            elif ev.kind == wsync.EventKind.ABORTED:
                print("engine %d: update aborted; version %d stands" % (args.rank, rx.committed_version))
        print("engine %d: OK: group closed at version %d" % (args.rank, rx.committed_version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
