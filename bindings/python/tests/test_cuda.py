"""CUDA tensors through the Python binding, on a real GPU: a trainer publishing CUDA parameters over
cuda_ipc to engine processes that register CUDA parameters (in place), receive staged in CUDA memory,
or take TensorView.torch() views of wsync's CUDA memory; and CUDA parameters over UCX to a host
receiver. Skipped without torch or without a CUDA device (the CPU machines of CI)."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import wsync  # noqa: E402
from conftest import ReceiverThread, Trainer  # noqa: E402
from cuda_receiver import net, sha  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def test_cuda_parameters_over_cuda_ipc_in_place_staged_and_as_views(tmp_path):
    addr_file = str(tmp_path / "store")
    modes = {1: "register", 2: "staged", 3: "views"}
    procs = {r: subprocess.Popen([sys.executable, os.path.join(HERE, "cuda_receiver.py"), addr_file, str(r), m,
                                  str(tmp_path / ("rx%d.json" % r))]) for r, m in modes.items()}
    sent = {}
    try:
        opts = {"store_addr_file": addr_file, "bucket_bytes": str(64 << 10)}
        with wsync.Group(3, group_name="pycuda", store_addr="127.0.0.1:0", transport="cuda_ipc", options=opts,
                         timeout_ms=60000) as g:
            for v in (1, 2, 3):
                trainer = net(v)
                g.send(trainer.named_parameters())
                g.finalize(v)
                sent[str(v)] = {n: sha(p) for n, p in trainer.named_parameters()}
    finally:
        codes = {r: p.wait(60) for r, p in procs.items()}
    assert codes == {1: 0, 2: 0, 3: 0}
    got = {r: json.load(open(tmp_path / ("rx%d.json" % r))) for r in modes}
    for r in modes:
        assert got[r]["versions"] == sent, modes[r]  # every tensor of every version, bit for bit
    assert got[1]["placed_in_place"] and all(got[1]["placed_in_place"])
    assert got[2]["unchanged_before_commit"] == [True, True, True]
    assert got[3]["cuda_views"] and all(got[3]["cuda_views"])


def test_cuda_parameters_over_ucx_reach_a_host_receiver(tmp_path):
    tr = Trainer(tmp_path)
    r = ReceiverThread(tr.addr_file)
    r.start()
    trainer = net(7)
    with tr.group({"bucket_bytes": str(32 << 10)}) as g:
        g.send(trainer.named_parameters())
        g.finalize(1)
    r.join(20)
    assert r.error is None
    assert r.committed[1] == {n: sha(p) for n, p in trainer.named_parameters()}

