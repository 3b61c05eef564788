#!/usr/bin/env python3
"""wsync sample trainer (Python): publishes a torch model's parameters for three versions into the
engines (samples/python/engine.py), two batches per version with the asynchronous send, and checks
that every version was committed by all of them.

  trainer.py --engines 2 --store-file /tmp/wsync-store [--store 0.0.0.0:0] [--transport ucx]
"""
import argparse
import sys
import time

import wsync
from model import build, checksums


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", type=int, default=2, help="receivers to wait for")
    ap.add_argument("--store", default="127.0.0.1:0", help="host:port of the store (port 0: any)")
    ap.add_argument("--store-file", required=True, help="file the store's host:port is written to")
    ap.add_argument("--transport", default="ucx")
    ap.add_argument("--versions", type=int, default=3)
    args = ap.parse_args()

    options = {"store_addr_file": args.store_file, "bucket_bytes": str(64 << 10), "verify_payload": "1"}
    with wsync.Group(args.engines, group_name="python-sample", store_addr=args.store, transport=args.transport,
                     options=options) as group:
        print("trainer: %d engine(s) joined at %s" % (args.engines, group.store_addr), flush=True)
        for version in range(1, args.versions + 1):
            params = list(build(version).named_parameters())  # "train a step"
            sums = checksums(params)
            t0 = time.perf_counter()
            first = group.send_async(params[: len(params) // 2])  # moves while the rest is prepared
            group.send(params[len(params) // 2:])
            first.wait()
            group.finalize(version)
            print("trainer: version %d (%d tensors, first %s) committed by every engine in %.3f s" % (
                version, len(sums), next(iter(sums.values()))[:12], time.perf_counter() - t0), flush=True)
        stats = group.stats()
        if stats.committed_version != args.versions or stats.updates != args.versions:
            print("trainer: FAILED: stats say version %d after %d updates" % (stats.committed_version, stats.updates))
            return 1
        print("trainer: OK: %d versions, %d tensors, %d bytes per engine" % (stats.updates, stats.tensors, stats.bytes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
