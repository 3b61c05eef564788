"""torch tensors in and out: named_parameters() registered so bytes land in place (zero-copy),
bfloat16, views, refusals. Skipped when torch is not installed."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import wsync  # noqa: E402
from conftest import ReceiverThread, Trainer, digest  # noqa: E402


def _net(seed, dtype=torch.bfloat16):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Embedding(128, 32), torch.nn.Linear(32, 48), torch.nn.LayerNorm(48),
                              torch.nn.Linear(48, 16, bias=False))
    return net.to(dtype)


def test_registered_parameters_receive_the_bytes_in_place(tmp_path):
    tr = Trainer(tmp_path)
    engine = _net(0)
    params = dict(engine.named_parameters())
    ptrs = {n: p.data_ptr() for n, p in params.items()}
    seen = []

    def on_event(rx, ev):
        if ev.kind == wsync.EventKind.BUCKET:
            for t in ev.tensors:
                seen.append((t.name, t.placed, t.torch() is params.get(t.name)))
        elif ev.kind == wsync.EventKind.COMMIT:
            rx.commit(ev.version)

    r = ReceiverThread(tr.addr_file, register=engine.named_parameters(), on_event=on_event)
    r.start()
    trainer_net = _net(1)
    with tr.group({"bucket_bytes": "8192"}) as g:
        g.send(trainer_net.named_parameters())  # requires_grad parameters go in as they are
        g.finalize(1)
    r.join(10)
    assert r.error is None
    assert sorted(seen) == sorted((n, True, True) for n in params)
    for n, p in trainer_net.named_parameters():
        assert params[n].data_ptr() == ptrs[n], n  # the same storage: no copy, no reallocation
        assert digest(params[n]) == digest(p), n
        assert torch.equal(params[n], p)


def test_unregistered_tensors_come_as_views_with_their_dtype(tmp_path):
    tr = Trainer(tmp_path)
    got = {}

    def on_event(rx, ev):
        if ev.kind == wsync.EventKind.BUCKET:
            for t in ev.tensors:
                got[t.name] = (t.dtype, t.shape, t.copy())
        elif ev.kind == wsync.EventKind.COMMIT:
            rx.commit(ev.version)

    r = ReceiverThread(tr.addr_file, on_event=on_event)
    r.start()
    sent = {"bf16": torch.randn(5, 7).to(torch.bfloat16), "i64": torch.arange(10), "f16": torch.randn(3).half(),
            "flag": torch.tensor([True, False, True]), "scalar": torch.tensor(2.5)}
    with tr.group() as g:
        g.send(sent)
        g.finalize(1)
    r.join(10)
    assert r.error is None
    for name, x in sent.items():
        dtype, shape, copy = got[name]
        assert dtype == str(x.dtype).replace("torch.", "") and shape == tuple(x.shape)
        assert copy.dtype == x.dtype and torch.equal(copy, x), name


def test_a_non_contiguous_tensor_is_refused_with_its_name():
    w = torch.zeros(4, 6).t()
    with pytest.raises(wsync.InvalidArgumentError) as e:
        wsync._tensors.Descriptors({"lm_head.weight": w})
    assert "lm_head.weight" in e.value.message and "contiguous" in e.value.message
    sparse = torch.zeros(3, 3).to_sparse()
    with pytest.raises(wsync.InvalidArgumentError, match="'s'"):
        wsync._tensors.Descriptors({"s": sparse})
    d = wsync._tensors.Descriptors({"ok": w.contiguous()})
    assert d.array[0].nbytes == 96 and d.array[0].ndim == 2 and list(d.array[0].shape)[:2] == [6, 4]


def test_numpy_and_torch_views_of_the_same_event_agree(tmp_path):
    tr = Trainer(tmp_path)
    out = {}

    def on_event(rx, ev):
        if ev.kind == wsync.EventKind.BUCKET:
            t = ev.tensors[0]
            out["np"] = t.numpy().copy()
            out["torch"] = t.torch().clone()
        elif ev.kind == wsync.EventKind.COMMIT:
            rx.commit(ev.version)

    r = ReceiverThread(tr.addr_file, on_event=on_event)
    r.start()
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    with tr.group() as g:
        g.send({"x": x})
        g.finalize(1)
    r.join(10)
    assert np.array_equal(out["np"], x.numpy()) and torch.equal(out["torch"], x)
