"""Settles which store key a torch ProcessGroupNCCL reads its NCCL unique id from, the way SGLang
and LMDeploy workers join a weight-update group (PROTOCOLS.md: derived
"/weight_update_group/weight_update_group//cuda//0").

wsync's own store server runs (store_interop_harness server, WSYNC_LOG_LEVEL=debug traces every
key); a torch process joins it as rank 1 of world 2 the way SGLang's init_custom_process_group
does (rendezvous on tcp://, PrefixStore(group_name), then a process group of that name) and
starts a broadcast. Nobody plays rank 0's NCCL side, so torch waits for the id; the keys it
waited for are the answer. The test then stores 128 bytes under the derived key and checks that
torch got past the wait (it reaches NCCL, which then fails or hangs for lack of rank 0: killed).

Needs a CUDA GPU and torch with NCCL; exits 77 (skipped) otherwise.
Usage: nccl_store_keys.py <store_interop_harness>
"""
import os
import subprocess
import sys
import time

HARNESS = sys.argv[1]
GROUP = "weight_update_group"
DERIVED = f"/{GROUP}/{GROUP}//cuda//0"

WORKER = r'''
import os, sys, torch, torch.distributed as dist
from torch.distributed.distributed_c10d import (Backend, PrefixStore, _new_process_group_helper, _world,
                                                default_pg_timeout, rendezvous)
from datetime import timedelta
port, group = int(sys.argv[1]), sys.argv[2]
torch.cuda.set_device(0)
store, rank, world = next(rendezvous(f"tcp://127.0.0.1:{port}", rank=1, world_size=2, timeout=timedelta(seconds=60)))
store.set_timeout(timedelta(seconds=60))
store = PrefixStore(group, store)
kw = {"backend_options" if "backend_options" in _new_process_group_helper.__code__.co_varnames else "pg_options": None}
pg, _ = _new_process_group_helper(2, 1, [], Backend("nccl"), store, group_name=group, timeout=timedelta(seconds=60), **kw)
_world.pg_group_ranks[pg] = {i: i for i in range(2)}
print("JOINED", flush=True)
t = torch.empty(16, device="cuda")
dist.broadcast(t, src=0, group=pg)
print("BROADCAST-RETURNED", flush=True)
'''


def main():
    try:
        import torch  # noqa: F401
        if not torch.cuda.is_available() or not torch.distributed.is_nccl_available():
            print("SKIPPED: needs torch with CUDA and NCCL and a GPU")
            return 77
    except ImportError:
        print("SKIPPED: no torch")
        return 77
    env = dict(os.environ, WSYNC_LOG_LEVEL="debug")
    server = subprocess.Popen([HARNESS, "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    port = int(server.stdout.readline())
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(port), GROUP], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    time.sleep(15)  # torch joins, builds the group, and waits for the id at the broadcast
    worker.kill()
    out = worker.communicate()[0]
    server.stdin.close()
    server.wait(timeout=10)
    trace = [l for l in server.stderr.read().splitlines() if "store server:" in l and " from " in l]
    print("torch worker output:\n" + out)
    print("keys torch asked for, in order:")
    for line in trace:
        print("  " + line.split("store server: ", 1)[1])
    waited = [l for l in trace if l.split("store server: ", 1)[1].startswith(("WAIT", "GET"))]
    hit = any(f"'{DERIVED}'" in l for l in waited)
    print(f"derived key {DERIVED!r} {'WAS' if hit else 'was NOT'} waited for")
    return 0 if hit else 1


if __name__ == "__main__":
    sys.exit(main())
