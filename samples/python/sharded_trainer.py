#!/usr/bin/env python3
"""wsync sample (Python): a sharded trainer publishes to engines without gathering anything.

A torch.distributed world of --ranks trainer ranks (gloo, CPU) trains a small MLP. Its
parameters live as DTensors on a 1-D mesh the way FSDP2 and tensor parallelism lay them out:
rows sharded (Shard(0), also unevenly: 10 rows over 4 ranks are 3,3,3,1), columns sharded
(Shard(1)) and replicated (Replicate()). Every rank is one sender of a many-sender wsync group and
publishes only its local shards (the DTensors themselves; full_tensor() is never called). --engines
engine processes receive the full tensors (the first in place, the others staged) and, after
each commit, check every tensor's SHA-256 against the full weights rank 0 wrote down. With
--tp 2, two more engine workers form a TP-2 engine: each registers its half of fc1.weight (rows)
and fc2.weight (columns), receives only that half, and checks it against rank 0's weights.

  python sharded_trainer.py --ranks 4 --engines 2 --tp 2 --steps 3
"""
import argparse
import hashlib
import json
import os
import pathlib
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

GROUP = "sharded-sample"


def build_model():
    torch.manual_seed(0)
    return torch.nn.ModuleDict({
        "embed": torch.nn.Embedding(10, 32),  # 10 rows: uneven over 4 ranks
        "fc1": torch.nn.Linear(32, 64),
        "fc2": torch.nn.Linear(64, 16),
    })


def placements_of(name):
    """How this sample lays each parameter out (FSDP2 rows, TP columns, a replica)."""
    from torch.distributed.tensor import Replicate, Shard
    if name == "fc2.weight":
        return [Shard(1)]  # tensor parallel, column-wise
    if name == "fc2.bias":
        return [Replicate()]
    return [Shard(0)]  # FSDP2's layout


def forward(m, x):
    h = torch.relu(m["fc1"](m["embed"](x).mean(dim=1)))
    return m["fc2"](h)


def digests(named):
    return {n: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest() for n, p in named}


def wait_file(path, timeout_s=60):
    until = time.time() + timeout_s
    p = pathlib.Path(path)
    while time.time() < until:
        if p.exists() and p.read_text().strip():
            return p.read_text().strip()
        time.sleep(0.05)
    raise SystemExit("no %s after %d s" % (path, timeout_s))


def trainer(rank, args, workdir):
    import wsync
    from torch.distributed.tensor import distribute_tensor, init_device_mesh
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    mesh = init_device_mesh("cpu", (args.ranks,))
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    options = {"num_senders": str(args.ranks), "sender_rank": str(rank), "timeout_ms": "30000"}
    if rank == 0:
        options["store_addr_file"] = os.path.join(workdir, "store")
    else:
        options["sender0_store"] = wait_file(os.path.join(workdir, "store"))
    with wsync.Group(args.engines + args.tp, group_name=GROUP, store_addr="127.0.0.1:0", options=options) as group:
        for step in range(1, args.steps + 1):
            # One training step, the same on every rank (same seed, same batch).
            g = torch.Generator().manual_seed(step)
            x = torch.randint(0, 10, (8, 4), generator=g)
            y = torch.randn(8, 16, generator=g)
            opt.zero_grad()
            torch.nn.functional.mse_loss(forward(model, x), y).backward()
            opt.step()
            # The parameters as DTensors (what an FSDP2 / TP trainer holds); each rank sends its shards.
            shards = {n: distribute_tensor(p.detach(), mesh, placements_of(n)) for n, p in model.named_parameters()}
            if rank == 0:  # what the engines must end up with, for the check
                torch.save({n: p.detach().clone() for n, p in model.named_parameters()},
                           os.path.join(workdir, "v%d.pt" % step))
                pathlib.Path(workdir, "v%d.json" % step).write_text(json.dumps(digests(model.named_parameters())))
            group.send(shards)
            group.finalize(step)
        stats = group.stats()
        print("trainer rank %d: %d versions published, %d plans computed (%d batches)" % (
            rank, args.steps, stats.plans_computed, stats.batches), flush=True)
    dist.destroy_process_group()


# A TP-2 engine worker's halves: fc1.weight by rows, fc2.weight by columns (Megatron's layout).
TP_SPLIT = {"fc1.weight": 0, "fc2.weight": 1}


def engine(rank, args, workdir, results):
    import wsync
    from wsync import boxes
    model = build_model()
    for p in model.parameters():
        p.data.zero_()
    params = dict(model.named_parameters())
    tp_rank = rank - args.engines - 1  # >= 0: a worker of the TP engine
    mode = "in_place" if rank % 2 else "staged"
    ok = False
    with wsync.Receiver(rank, wait_file(os.path.join(workdir, "store")), group_name=GROUP,
                        options={"receive_mode": mode, "timeout_ms": "30000"}) as rx:
        buffers, held = {}, {}
        for n, p in params.items():
            if tp_rank >= 0 and n in TP_SPLIT:
                box = boxes.tp_slice(tuple(p.shape), TP_SPLIT[n], args.tp, tp_rank)
                held[n] = (box, torch.zeros(box.shape, dtype=p.dtype))
                buffers[n] = wsync.Slice(held[n][1], tuple(p.shape), box)  # only this half arrives
            else:
                buffers[n] = p.data
        rx.register(buffers)
        for ev in rx.events():
            if ev.kind == wsync.EventKind.COMMIT:
                want = json.loads(wait_file(os.path.join(workdir, "v%d.json" % ev.version)))
                rx.commit(ev.version)
                have = digests(params.items())
                bad = sorted(n for n in want if n not in held and have.get(n) != want[n])
                full = torch.load(os.path.join(workdir, "v%d.pt" % ev.version))
                bad += sorted(n for n, (box, t) in held.items() if not torch.equal(t, full[n][box.slices()]))
                if bad:
                    print("engine %d: FAILED at version %d: %s differ" % (rank, ev.version, bad), flush=True)
                    break
                print("engine %d (%s%s): version %d: all %d tensors equal the trainer's%s" % (
                    rank, mode, ", TP rank %d" % tp_rank if tp_rank >= 0 else "", ev.version, len(want),
                    " (%d of them its TP half)" % len(held) if held else ""), flush=True)
                ok = rx.committed_version == args.steps
    results.put((rank, ok))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tp", type=int, default=0, help="add a TP engine of this many workers (each takes its shard)")
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    # The trainer and its engines share a group secret out of band (here: the environment).
    os.environ.setdefault("WSYNC_GROUP_SECRET", os.urandom(32).hex())
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as workdir:
        total = args.engines + args.tp
        engines = [ctx.Process(target=engine, args=(r, args, workdir, results)) for r in range(1, total + 1)]
        for e in engines:
            e.start()
        trainers = mp.start_processes(trainer, args=(args, workdir), nprocs=args.ranks, join=False,
                                      start_method="spawn")
        ok = True
        try:
            while not trainers.join(timeout=120):
                pass
        except Exception as e:  # a rank failed: ProcessRaisedException names it
            print("sharded trainer: a rank failed: %s" % e)
            ok = False
        for e in engines:
            e.join(timeout=60)
        got = dict(results.get(timeout=5) for _ in engines) if ok else {}
        ok = ok and all(got.get(r) for r in range(1, total + 1))
    print("sharded sample: %s" % ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
