"""The `wsync` vLLM backend's engine (wsync/vllm/engine.py) driven the way vLLM's worker drives it,
without a vLLM server: a real wsync group (native adapter, ucx, loopback) as the trainer, the
engine's receiver in a thread calling start/receive/finish as the worker's routes would, and a
small torch model with vLLM's load_weights contract. It covers what the CPU server cannot: the
in_place mode (parameters registered per bucket, bytes written into them, data pointers
unchanged), tensors that must go through load_weights (stacked q/k/v, a padded vocabulary),
and a failure inside /update_weights (the trainer aborts while the worker waits).

Needs vLLM importable (the engine subclasses vLLM's WeightTransferEngine); skipped otherwise.
"""
import hashlib
import os
import pathlib
import threading
import time
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm.distributed.weight_transfer.base")

import wsync  # noqa: E402
from wsync.vllm import engine as wengine  # noqa: E402

HIDDEN, VOCAB, PADDED_VOCAB = 16, 50, 64


class TinyModel(torch.nn.Module):
    """vLLM-shaped: a padded embedding, a stacked qkv (checkpoint q/k/v), a norm, a head."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Parameter(torch.zeros(PADDED_VOCAB, HIDDEN), requires_grad=False)
        self.qkv = torch.nn.Parameter(torch.zeros(3 * HIDDEN, HIDDEN), requires_grad=False)
        self.norm = torch.nn.Parameter(torch.zeros(HIDDEN), requires_grad=False)
        self.head = torch.nn.Parameter(torch.zeros(VOCAB, HIDDEN, dtype=torch.bfloat16), requires_grad=False)
        self.loaded = []

    def load_weights(self, weights):
        for name, w in weights:
            self.loaded.append(name)
            if name == "embed":
                self.embed.data[:VOCAB].copy_(w)
            elif name in ("q", "k", "v"):
                i = "qkv".index(name)
                self.qkv.data[i * HIDDEN:(i + 1) * HIDDEN].copy_(w)
            else:
                getattr(self, name).data.copy_(w)


def checkpoint(seed):
    g = torch.Generator().manual_seed(seed)
    return {"embed": torch.randn(VOCAB, HIDDEN, generator=g), "q": torch.randn(HIDDEN, HIDDEN, generator=g),
            "k": torch.randn(HIDDEN, HIDDEN, generator=g), "v": torch.randn(HIDDEN, HIDDEN, generator=g),
            "norm": torch.randn(HIDDEN, generator=g), "head": torch.randn(VOCAB, HIDDEN, generator=g).bfloat16()}


def info(batch):
    return wengine.WsyncUpdateInfo(names=list(batch), dtype_names=[str(t.dtype)[6:] for t in batch.values()],
                                   shapes=[list(t.shape) for t in batch.values()])


def make_engine(model):
    cfg = SimpleNamespace(parallel_config=SimpleNamespace(data_parallel_index=0, world_size=1, rank=0),
                          model_config=SimpleNamespace(quantization=None))
    return wengine.WsyncWeightTransferEngine(SimpleNamespace(backend="wsync"), cfg, torch.device("cpu"), model)


def read_addr(path):
    for _ in range(2000):
        if os.path.exists(path) and pathlib.Path(path).read_text().strip():
            return pathlib.Path(path).read_text().strip()
        time.sleep(0.01)
    raise RuntimeError("no store address")


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("WSYNC_VLLM_LOAD", "in_place")
    monkeypatch.setenv("WSYNC_VLLM_TIMEOUT_MS", "20000")
    model = TinyModel()
    eng = make_engine(model)
    addr_file = str(tmp_path / "store")
    joined = threading.Thread(target=lambda: eng.init_transfer_engine(
        wengine.WsyncInitInfo(store_addr=read_addr(addr_file), rank_offset=1, world_size=2, group_name="eng")))
    joined.start()
    # window 1, as a trainer's group with HTTP engines has (docs/ABI.md "Group options"): the next
    # batch's MANIFEST goes out once the last bucket was acknowledged. (With a wider window the
    # receiver may take it while /update_weights of the batch before still runs, before the next
    # /update_weights registered its parameters.)
    group = wsync.Group(1, group_name="eng", store_addr="127.0.0.1:0", transport="ucx",
                        options={"store_addr_file": addr_file, "verify_payload": "1", "window": "1"},
                        timeout_ms=20000)
    joined.join(20)
    yield group, eng, model
    group.close()
    eng.shutdown()


def worker(eng, batches, errors):
    """The worker's side of one update: /start_weight_update, /update_weights per batch,
    /finish_weight_update."""
    try:
        eng.start_weight_update()
        for b in batches:
            eng.update_weights({"names": list(b), "dtype_names": [str(t.dtype)[6:] for t in b.values()],
                                "shapes": [list(t.shape) for t in b.values()]})
        eng.finish_weight_update()
    except Exception as e:  # reported by the test
        errors.append(e)


def outcome(eng, timeout_s=5.0):
    """The commit helper's outcome, once it has one (it sets it right after confirming)."""
    until = time.time() + timeout_s
    while eng.last_outcome is None and time.time() < until:
        time.sleep(0.01)
    return eng.last_outcome


def digest(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def test_in_place_places_matching_parameters_and_loads_the_rest(setup):
    group, eng, model = setup
    assert eng.mode == "in_place"
    ptrs = {n: p.data_ptr() for n, p in model.named_parameters()}
    for version in (1, 2):
        w = checkpoint(version)
        batches = [{"embed": w["embed"], "q": w["q"], "k": w["k"]}, {"v": w["v"], "norm": w["norm"], "head": w["head"]}]
        errors, model.loaded, eng.last_outcome = [], [], None
        th = threading.Thread(target=worker, args=(eng, batches, errors))
        th.start()
        for b in batches:
            group.send(b)
        group.finalize(version)  # returns once the engine's commit helper confirmed
        th.join(20)
        assert not errors, errors
        assert outcome(eng) == "committed %d" % version and eng.rx.committed_version == version
        # norm and head match a parameter's name, dtype and shape: written in place, never loaded
        assert sorted(model.loaded) == ["embed", "k", "q", "v"]
        assert eng._registered == {"norm", "head"}
        assert digest(model.norm.data) == digest(w["norm"]) and digest(model.head.data) == digest(w["head"])
        assert torch.equal(model.qkv.data, torch.cat([w["q"], w["k"], w["v"]]))
        assert torch.equal(model.embed.data[:VOCAB], w["embed"]) and not model.embed.data[VOCAB:].any()
        assert {n: p.data_ptr() for n, p in model.named_parameters()} == ptrs  # nothing reallocated


def test_an_abort_while_the_worker_waits_fails_the_update_and_the_next_one_works(setup):
    group, eng, model = setup
    w = checkpoint(3)
    errors = []
    # The worker is told about two batches; the trainer sends the first, then aborts.
    th = threading.Thread(target=worker, args=(eng, [{"q": w["q"]}, {"k": w["k"]}], errors))
    th.start()
    group.send({"q": w["q"]})
    time.sleep(0.3)  # the worker now waits inside /update_weights for 'k'
    group.abort()
    th.join(20)
    assert len(errors) == 1 and "aborted" in str(errors[0]), errors
    assert not eng.in_update and eng.rx.committed_version == 0
    group.close()
    # A new trainer (as after the engines' reset: shutdown, init) updates the same engine.
    eng.shutdown()
    addr_file = str(pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / ("eng-store-%d" % os.getpid()))
    if os.path.exists(addr_file):
        os.unlink(addr_file)
    joined = threading.Thread(target=lambda: eng.init_transfer_engine(
        wengine.WsyncInitInfo(store_addr=read_addr(addr_file), rank_offset=1, world_size=2, group_name="eng2")))
    joined.start()
    with wsync.Group(1, group_name="eng2", store_addr="127.0.0.1:0", transport="ucx",
                     options={"store_addr_file": addr_file}, timeout_ms=20000) as g2:
        joined.join(20)
        errors, eng.last_outcome = [], None
        th = threading.Thread(target=worker, args=(eng, [w], errors))
        th.start()
        g2.send(w)
        g2.finalize(1)
        th.join(20)
    os.unlink(addr_file)
    assert not errors and outcome(eng) == "committed 1"
    assert torch.equal(model.qkv.data, torch.cat([w["q"], w["k"], w["v"]]))


def test_a_vllm_whose_layer_state_differs_still_reports_the_update_failure(setup, monkeypatch, caplog):
    """Putting back a partly loaded layer writes vLLM's private layerwise state inside the failure's
    except block. A vLLM whose state lacks a field is named (with the release this was checked
    against), and the update's own failure is what propagates, not an AttributeError."""
    from vllm.model_executor.model_loader.reload import layerwise
    group, eng, model = setup
    monkeypatch.setattr(layerwise, "get_layerwise_info", lambda layer: SimpleNamespace(can_load=lambda: True))
    with pytest.raises(RuntimeError, match="has no load_numel.*checked against vLLM %s" % wengine.CHECKED_VLLM):
        eng._forget_partial_layers()
    eng.mode, eng.in_update = "layerwise", True
    with caplog.at_level("ERROR", logger="wsync.vllm"):
        with pytest.raises(RuntimeError, match="the update's own failure"):
            try:
                raise RuntimeError("the update's own failure")
            except BaseException:
                eng._finish_after_failure()  # what update_weights' except block does
                raise
    assert any("putting back the previous weights failed too" in r.getMessage() and "has no load_numel" in
               r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert not eng.in_update
    eng.mode = "in_place"


def test_a_tensor_the_request_does_not_name_fails_the_update(setup):
    group, eng, model = setup
    w = checkpoint(4)
    errors = []
    th = threading.Thread(target=worker, args=(eng, [{"q": w["q"]}], errors))
    th.start()
    group.send({"norm": w["norm"]})  # the request named 'q'
    th.join(20)
    assert len(errors) == 1 and "'norm'" in str(errors[0]) and "does not name it" in str(errors[0])
    assert not eng.in_update


def test_the_default_is_the_layerwise_reload_and_settings_are_checked(monkeypatch):
    monkeypatch.delenv("WSYNC_VLLM_LOAD", raising=False)
    assert make_engine(TinyModel()).mode == "layerwise"  # in_place must be asked for
    monkeypatch.setenv("WSYNC_VLLM_LOAD", "zero_copy")
    with pytest.raises(ValueError, match="WSYNC_VLLM_LOAD"):
        make_engine(TinyModel())
    monkeypatch.setenv("WSYNC_VLLM_LOAD", "in_place")
    monkeypatch.setenv("WSYNC_VLLM_TIMEOUT_MS", "0")
    with pytest.raises(ValueError, match="WSYNC_VLLM_TIMEOUT_MS"):
        make_engine(TinyModel())


def test_init_info_is_checked():
    with pytest.raises(ValueError, match="store_addr"):
        wengine.WsyncInitInfo(store_addr="nohostport", rank_offset=1, world_size=2)
    with pytest.raises(ValueError, match="rank_offset"):
        wengine.WsyncInitInfo(store_addr="h:1", rank_offset=0, world_size=2)
    with pytest.raises(TypeError):
        wengine.WsyncInitInfo(store_addr="h:1", rank_offset=1, world_size=2, master_port=5)
    with pytest.raises(ValueError, match="same length"):
        wengine.WsyncUpdateInfo(names=["a"], dtype_names=[], shapes=[[1]])


def test_staged_refuses_a_transposed_tensor_naming_it_and_leaves_the_model_untouched(setup):
    """WSYNC_VLLM_LOAD=staged: tensors are kept aside until /finish_weight_update; a tensor whose
    shape is not the served checkpoint's is refused on arrival (its name, its shape, the shape
    wanted), and nothing of the update reaches the model."""
    group, eng, model = setup
    eng.mode = "staged"
    eng._wanted = {n: (None, tuple(t.shape)) for n, t in checkpoint(0).items()}  # the served checkpoint
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    w = checkpoint(5)
    bad = {"head": w["head"].t().contiguous()}  # [HIDDEN, VOCAB] where the model wants [VOCAB, HIDDEN]
    errors = []
    th = threading.Thread(target=worker, args=(eng, [{"q": w["q"], "norm": w["norm"]}, bad], errors))
    th.start()
    group.send({"q": w["q"], "norm": w["norm"]})
    group.send(bad)
    th.join(20)
    assert len(errors) == 1, errors
    msg = str(errors[0])
    assert "'head'" in msg and str([HIDDEN, VOCAB]) in msg and str([VOCAB, HIDDEN]) in msg, msg
    assert not eng.in_update and not eng._staged and model.loaded == []
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n


def test_staged_loads_nothing_at_a_finish_without_a_commit(setup):
    """WSYNC_VLLM_LOAD=staged: a trainer that sent every tensor and died before its COMMIT (a new
    trainer's reset then finishes the update, which nothing tells apart from the trainer's own
    finish) leaves the model untouched: the staged update loads only when a COMMIT comes."""
    group, eng, model = setup
    eng.mode = "staged"
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    w = checkpoint(6)
    errors = []
    th = threading.Thread(target=worker, args=(eng, [w], errors))
    th.start()
    group.send(w)
    th.join(20)
    assert errors == [] and not th.is_alive()
    assert model.loaded == [] and len(eng._staged) == len(w)  # finished, held until a COMMIT
    eng.shutdown()  # the new trainer's reset: no COMMIT came
    assert model.loaded == [] and not eng._staged
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n


# ---- Many senders: a tensor that comes before the request naming it ------------------------------

class _View:
    """A tensor of a BUCKET event, as the receiver gives it (not placed)."""

    def __init__(self, name, t):
        self.name, self.dtype, self.shape, self.placed, self._t = name, str(t.dtype)[6:], tuple(t.shape), False, t

    def copy(self):
        return self._t.clone()

    def torch(self):
        return self._t


class _Receiver:
    """The receiver's events in a fixed order (what two senders' buckets may give)."""

    def __init__(self, *buckets):
        self.events = [SimpleNamespace(kind=wsync.EventKind.BUCKET, tensors=[_View(n, t) for n, t in b.items()])
                       for b in buckets]

    def next(self, timeout_ms=None):
        if not self.events:
            raise wsync.TimeoutError("no event")
        return self.events.pop(0)


def _engine_of(monkeypatch, rx, num_senders):
    monkeypatch.setenv("WSYNC_VLLM_LOAD", "in_place")
    model = TinyModel()
    eng = make_engine(model)
    eng.rx, eng.num_senders, eng._can_register = rx, num_senders, False
    eng.start_weight_update()
    return eng, model


def test_many_senders_a_tensor_before_its_request_is_kept_for_it(monkeypatch):
    """Sender 1 sends its boxes of batch 2 (head) while sender 0's of batch 1 (embed) still move:
    head is kept until the request that names it, which takes it without waiting."""
    w = checkpoint(5)
    eng, model = _engine_of(monkeypatch, _Receiver({"head": w["head"]}, {"embed": w["embed"]}), num_senders=2)
    eng.receive_weights(info({"embed": w["embed"]}))
    assert set(eng._early) == {"head"} and model.loaded == ["embed"]
    eng.receive_weights(info({"head": w["head"]}))  # no event left: it came already
    assert not eng._early and model.loaded == ["embed", "head"]
    assert digest(model.head.data) == digest(w["head"])
    assert torch.equal(model.embed.data[:VOCAB], w["embed"])


def test_many_senders_a_tensor_no_request_names_fails_the_finish(monkeypatch):
    w = checkpoint(6)
    eng, model = _engine_of(monkeypatch, _Receiver({"head": w["head"]}, {"embed": w["embed"]}), num_senders=2)
    eng.receive_weights(info({"embed": w["embed"]}))
    with pytest.raises(ValueError, match="arrived that no /update_weights of this update named: head"):
        eng.finish_weight_update()
    assert not eng.in_update and not eng._early and model.loaded == ["embed"]


def test_one_sender_still_refuses_a_tensor_the_request_does_not_name(monkeypatch):
    w = checkpoint(7)
    eng, model = _engine_of(monkeypatch, _Receiver({"head": w["head"]}, {"embed": w["embed"]}), num_senders=1)
    with pytest.raises(RuntimeError, match="'head' arrived but this /update_weights does not name it"):
        eng.receive_weights(info({"embed": w["embed"]}))
    assert not eng._early and not eng.in_update
