"""One engine process for test_cuda.py: a wsync receiver on the GPU (CUDA IPC maps the trainer's
staging, which needs a process of its own). Modes: `register` (CUDA parameters registered, bytes land
in place), `staged` (receive_mode=staged: the parameters change only at commit) and `views` (nothing
registered: TensorView.torch() over wsync's CUDA memory). Writes {version: {name: sha256}} as JSON,
plus what it checked on the way, to `out`."""
import hashlib
import json
import sys

import torch

import wsync


def sha(t):
    return hashlib.sha256(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()).hexdigest()


def net(seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Embedding(512, 64), torch.nn.Linear(64, 96), torch.nn.LayerNorm(96),
                            torch.nn.Linear(96, 32, bias=False))
    return m.to(torch.bfloat16).cuda()


def main(addr_file, rank, mode, out):
    addr = open(addr_file).read().strip()
    params = dict(net(0).named_parameters())
    opts = {"receive_mode": "staged"} if mode == "staged" else {}
    result = {"versions": {}, "placed_in_place": [], "cuda_views": [], "unchanged_before_commit": []}
    views = {}
    with wsync.Receiver(rank, addr, group_name="pycuda", transport="cuda_ipc", options=opts, timeout_ms=30000) as rx:
        if mode != "views":
            rx.register(params)
        last = {n: sha(p) for n, p in params.items()}
        for ev in rx.events(30000):
            if ev.kind == wsync.EventKind.BUCKET:
                for t in ev.tensors:
                    v = t.torch()
                    if mode == "views":
                        result["cuda_views"].append(bool(v.is_cuda))
                        views[t.name] = sha(v)
                    elif mode == "register":
                        result["placed_in_place"].append(bool(t.placed) and v is params[t.name])
            elif ev.kind == wsync.EventKind.COMMIT:
                if mode == "staged":  # the registered parameters still hold the previous version
                    result["unchanged_before_commit"].append({n: sha(p) for n, p in params.items()} == last)
                rx.commit(ev.version)
                got = views if mode == "views" else {n: sha(p) for n, p in params.items()}
                result["versions"][str(ev.version)] = dict(got)
                last = dict(got)
    json.dump(result, open(out, "w"))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
