"""The `wsync` vLLM backend's engine (wsync/vllm/engine.py) driven the way vLLM's worker drives it,
without a vLLM server: a real wsync group (native adapter, ucx, loopback) as the trainer, the
engine's receiver in a thread calling start/receive/finish as the worker's routes would, and a
small torch model with vLLM's load_weights contract. It covers what the CPU server cannot: the
in_place mode (parameters registered per bucket, bytes written into them, data pointers
unchanged), tensors that must go through load_weights (stacked q/k/v, a padded vocabulary),
and a failure inside /update_weights (the trainer aborts while the worker waits). The trainer's
calls through POST /collective_rpc (wsync_check, wsync_abandon, wsync_state) are driven against
a receiver that gives fixed events, and a two-layer model in vLLM's layerwise reload.

Needs vLLM importable (the engine subclasses vLLM's WeightTransferEngine); skipped otherwise.
"""
import hashlib
import json
import logging
import os
import pathlib
import re
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
            except BaseException as e:
                eng._finish_after_failure(str(e))  # what update_weights' except block does
                raise
    # one line: the update's failure, and that what the worker holds is not known
    lines = [r.getMessage() for r in caplog.records if r.name == "wsync.vllm"]
    assert len(lines) == 1 and "the update's own failure" in lines[0] and "putting back the previous weights " \
        "failed too" in lines[0] and "has no load_numel" in lines[0], lines
    assert not eng.in_update
    state = eng("wsync_state")
    assert state["whole"] is False and "putting back the previous weights failed too" in state["holds"], state
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
    """A tensor of a BUCKET event, as the receiver gives it (not placed, unless told)."""

    def __init__(self, name, t, placed=False):
        self.name, self.dtype, self.shape, self.placed, self._t = name, str(t.dtype)[6:], tuple(t.shape), placed, t

    def copy(self):
        return self._t.clone()

    def torch(self):
        return self._t


class _Receiver:
    """The receiver's events in a fixed order (what two senders' buckets may give): a dict is a
    BUCKET of those tensors, an exception is raised, anything else is an event as it is (ABORTED,
    COMMIT). The events are all there from the start, where a real receiver gets them as the
    trainer sends: so the engine's watcher (between routes) sees none, unless `watchable`."""

    def __init__(self, *buckets, watchable=False):
        self.events = [b if not isinstance(b, dict) else
                       SimpleNamespace(kind=wsync.EventKind.BUCKET, tensors=[_View(n, t) for n, t in b.items()])
                       for b in buckets]
        self.committed = []
        self.watchable = watchable

    def next(self, timeout_ms=None):
        if not self.events or (not self.watchable and threading.current_thread().name.startswith("wsync-watch")):
            raise wsync.TimeoutError("no event")
        ev = self.events.pop(0)
        if isinstance(ev, Exception):
            raise ev
        return ev

    def commit(self, version):
        self.committed.append(version)


ABORTED = SimpleNamespace(kind=wsync.EventKind.ABORTED)


def commit_event(version):
    return SimpleNamespace(kind=wsync.EventKind.COMMIT, version=version)


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


# ---- What the trainer calls: wsync_check, wsync_abandon, wsync_state (POST /collective_rpc) -------

def catalogue(w):
    """wsync_check's argument: the update's tensors as JSON text."""
    return json.dumps({"names": list(w), "dtype_names": [str(t.dtype)[6:] for t in w.values()],
                       "shapes": [list(t.shape) for t in w.values()]})


def our_lines(caplog, level="WARNING"):
    """This backend's log lines at `level` or above."""
    return [r.getMessage() for r in caplog.records if r.name == "wsync.vllm" and r.levelno >= getattr(logging, level)]


def served_engine(tmp_path, monkeypatch, mode="in_place"):
    """An engine serving TinyModel from a folder with its checkpoint (safetensors: the names,
    dtypes and shapes wsync_check checks against come from its header), model dtype float32."""
    from safetensors.torch import save_file
    save_file({n: t.contiguous() for n, t in checkpoint(0).items()}, str(tmp_path / "model.safetensors"))
    monkeypatch.setenv("WSYNC_VLLM_LOAD", mode)
    model = TinyModel()
    cfg = SimpleNamespace(parallel_config=SimpleNamespace(data_parallel_index=0, world_size=1, rank=0),
                          model_config=SimpleNamespace(quantization=None, model=str(tmp_path), dtype=torch.float32))
    eng = wengine.WsyncWeightTransferEngine(SimpleNamespace(backend="wsync"), cfg, torch.device("cpu"), model)
    return eng, model


def test_check_accepts_a_catalogue_that_fits_and_touches_nothing(tmp_path, monkeypatch):
    eng, model = served_engine(tmp_path, monkeypatch)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    w = checkpoint(1)
    assert eng("wsync_check", catalogue(w)) == {"ok": True, "checked": 6, "known": True}
    w["head"] = w["head"].float()  # the served model's dtype (float32) is accepted too
    assert eng("wsync_check", catalogue(w))["ok"] is True
    w["norm"] = w["norm"].bfloat16()  # and any float the loader casts (fp32 masters into a bf16 model)
    assert eng("wsync_check", catalogue(w))["ok"] is True
    # a tied lm_head.weight (vLLM's loader skips it, as when a trainer sends its state_dict)
    eng.vllm_config.model_config.hf_config = SimpleNamespace(tie_word_embeddings=True)
    assert eng("wsync_check", catalogue({**w, "lm_head.weight": w["head"]}))["ok"] is True
    del eng.vllm_config.model_config.hf_config
    assert model.loaded == [] and not eng.in_update
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n
    assert eng("wsync_state") == {"whole": True, "holds": "the weights it started with", "open": False}
    # a server whose checkpoint is not a local folder: names and shapes cannot be checked
    assert make_engine(TinyModel())("wsync_check", catalogue(w)) == {"ok": True, "checked": 6, "known": False}


def _transposed(w):
    w["head"] = w["head"].t().contiguous()


REFUSED = {  # a change to a good catalogue -> words its refusal must have
    "transposed": (_transposed, ["tensor 'head' has shape [16, 50] but the served model wants [50, 16]"]),
    "unknown name": (lambda w: w.update({"lm_head.weight": w["head"]}),
                     ["tensor 'lm_head.weight' is not in the served checkpoint"]),
    "wrong dtype": (lambda w: w.update(q=w["q"].to(torch.int8)), ["tensor 'q' has dtype int8", "wants float32"]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_check_refuses_a_tensor_that_does_not_fit_naming_it_and_what_was_wanted(tmp_path, monkeypatch, caplog, case):
    eng, model = served_engine(tmp_path, monkeypatch)
    change, words = REFUSED[case]
    assert eng("wsync_check", catalogue(checkpoint(1)))["ok"]  # a catalogue kept, until the next check
    w = checkpoint(2)
    change(w)
    caplog.clear()
    with caplog.at_level("INFO", logger="wsync.vllm"):
        res = eng("wsync_check", catalogue(w))
    assert res["ok"] is False and set(res) == {"ok", "refused"}, res
    assert "1 of the update's" in res["refused"] and "\n" not in res["refused"], res
    for word in words:
        assert word in res["refused"], (word, res)
    assert our_lines(caplog) == [our_lines(caplog)[0]] and res["refused"] in our_lines(caplog)[0]  # one line
    assert eng._catalogue is None and model.loaded == []  # none kept, nothing touched


@pytest.mark.parametrize("text,words", [
    ("{names: [", "not JSON"),
    (json.dumps({"names": "q", "dtype_names": ["float32"], "shapes": [[16, 16]]}), "lists names, dtype_names"),
    (json.dumps({"names": ["q", "k"], "dtype_names": ["float32"], "shapes": [[16, 16]]}), "same length (2, 1, 1)"),
    (json.dumps({"names": ["q", "q"], "dtype_names": ["float32"] * 2, "shapes": [[16, 16]] * 2}), "'q' is named twice"),
    (json.dumps({"names": ["q"], "dtype_names": ["float33"], "shapes": [[16, 16]]}), "no torch dtype"),
    (json.dumps({"names": ["q"], "dtype_names": ["float32"], "shapes": [["16"]]}), "not a list of sizes"),
    (None, "must be JSON text"),
])
def test_check_refuses_a_malformed_catalogue_in_words(tmp_path, monkeypatch, caplog, text, words):
    eng, model = served_engine(tmp_path, monkeypatch)
    with caplog.at_level("ERROR", logger="wsync.vllm"):
        res = eng("wsync_check", text)
    assert res["ok"] is False and words in res["refused"], res
    assert len(our_lines(caplog)) == 1 and eng._catalogue is None


def test_check_names_the_first_few_bad_tensors_with_their_count_and_refuses_during_an_update(tmp_path, monkeypatch):
    eng, model = served_engine(tmp_path, monkeypatch)
    w = {n: t.to(torch.int8) for n, t in checkpoint(1).items()}
    res = eng("wsync_check", catalogue(w))
    assert res["refused"].startswith("6 of the update's 6 tensor(s) do not fit the served model: tensor 'embed'"), res
    assert res["refused"].endswith("; and 3 more"), res
    eng.rx = _Receiver()
    eng.start_weight_update()
    res = eng("wsync_check", catalogue(checkpoint(1)))
    assert res["ok"] is False and "an update is open" in res["refused"], res
    with pytest.raises(ValueError, match="wsync_check, wsync_abandon, wsync_state"):
        eng("wsync_reload")


@pytest.mark.parametrize("case", ["undeclared", "other dtype"])
def test_a_checked_catalogue_makes_update_weights_refuse_what_it_lacks_before_loading_it(tmp_path, monkeypatch,
                                                                                         case):
    eng, model = served_engine(tmp_path, monkeypatch)
    w = checkpoint(3)
    declared = {n: w[n] for n in ("q", "k", "v")} if case == "undeclared" else w
    assert eng("wsync_check", catalogue(declared))["ok"]
    batch = {"q": w["q"], "norm": w["norm"]} if case == "undeclared" else {"q": w["q"], "embed": w["embed"].bfloat16()}
    eng.rx, eng._can_register = _Receiver(batch), False
    eng.start_weight_update()
    want = ("'norm' is not in the catalogue" if case == "undeclared" else
            "'embed' is announced as bfloat16[50, 16] but the checked catalogue has float32[50, 16]")
    with pytest.raises(ValueError, match=re.escape(want)):
        eng.receive_weights(info(batch))
    assert len(eng.rx.events) == 1 and model.loaded == []  # the bucket was not even taken
    assert not eng.in_update and eng._catalogue is None  # the update ended; its catalogue with it
    assert eng("wsync_abandon") == {"whole": True, "open": False,
                                    "holds": "the weights it started with (nothing of the failed update was loaded)"}


class LayerModel(torch.nn.Module):
    """vLLM-shaped for the layerwise reload: two layers whose tensors load through their
    parameters' weight_loader, as vLLM's models do, so a layer is processed (and holds the new
    weights) once it got all of its tensors."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(2))
        for p in self.parameters():
            p.requires_grad_(False)

    def load_weights(self, weights):
        from vllm.model_executor.model_loader.weight_utils import default_weight_loader
        params = dict(self.named_parameters())
        for name, w in weights:
            getattr(params[name], "weight_loader", default_weight_loader)(params[name], w)


def layer_weights(seed):
    g = torch.Generator().manual_seed(seed)
    return {"layers.%d.%s" % (i, n): torch.randn(*shape, generator=g)
            for i in range(2) for n, shape in (("weight", (HIDDEN, HIDDEN)), ("bias", (HIDDEN,)))}


def layer_engine(monkeypatch, mode, *events, start=True):
    """A LayerModel's engine (vLLM recorded its layers for reloading, as its loader does), its
    receiver giving `events`, its update started as /start_weight_update does (unless not `start`)."""
    from vllm.model_executor.model_loader.reload import record_metadata_for_reloading
    monkeypatch.setenv("WSYNC_VLLM_LOAD", mode)
    model = LayerModel()
    record_metadata_for_reloading(model)
    eng = make_engine(model)
    eng.rx, eng._can_register = _Receiver(*events), False
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    if start:
        eng.start_weight_update()
    return eng, model, before


def test_abandon_after_a_failure_before_any_layer_completed_says_nothing_was_loaded(monkeypatch, caplog):
    w = layer_weights(1)
    # layer 0 gets its weight, not its bias (a layer short of a tensor keeps its previous weights)
    eng, model, before = layer_engine(monkeypatch, "layerwise", {"layers.0.weight": w["layers.0.weight"]}, ABORTED)
    assert eng("wsync_state")["open"] is True
    with caplog.at_level("INFO", logger="wsync.vllm"):
        with pytest.raises(RuntimeError, match="aborted"):
            eng.receive_weights(info({n: w[n] for n in ("layers.0.weight", "layers.0.bias")}))
    lines = our_lines(caplog)
    assert len(lines) == 1 and "the trainer aborted the update" in lines[0] and \
        "it holds the weights it started with, as before the update (nothing was loaded)" in lines[0], lines
    # nor vLLM's line per layer that got nothing (each gets its previous weights back, as it should)
    assert not [r for r in caplog.records if "Failed to load weights" in r.getMessage()]
    state = eng("wsync_abandon")
    assert state == {"whole": True, "open": False,
                     "holds": "the weights it started with (nothing of the failed update was loaded)"}, state
    assert eng("wsync_abandon") == state and eng("wsync_state") == state
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n


def test_abandon_after_a_layer_was_processed_names_it(monkeypatch, caplog):
    w = layer_weights(2)
    layer0 = {n: w[n] for n in ("layers.0.weight", "layers.0.bias")}
    eng, model, before = layer_engine(monkeypatch, "layerwise", layer0, ABORTED)
    with caplog.at_level("INFO", logger="wsync.vllm"):
        with pytest.raises(RuntimeError, match="aborted"):
            eng.receive_weights(info({**layer0, "layers.1.weight": w["layers.1.weight"]}))
    lines = our_lines(caplog)
    assert len(lines) == 1 and "it holds a mix of two versions (1 layer(s) hold the failed update's weights: " \
        "layers.0; the rest the weights it started with)" in lines[0] and "engine_resume_on_failure=1" in lines[0] \
        and "POST /resume to serve the mix" in lines[0], lines
    state = eng("wsync_abandon")
    assert state == {"whole": False, "open": False,
                     "holds": "a mix of two versions: 1 layer(s) hold the failed update's weights (layers.0), "
                              "the rest the weights it started with"}, state
    assert eng("wsync_abandon") == state
    assert torch.equal(model.layers[0].weight, w["layers.0.weight"])  # processed: the new weights
    assert torch.equal(model.layers[1].weight, before["layers.1.weight"])


def test_a_commit_makes_it_whole_at_that_version_and_forgets_the_catalogue(monkeypatch):
    w = layer_weights(3)
    eng, model, before = layer_engine(monkeypatch, "layerwise", w, commit_event(7), start=False)
    assert eng("wsync_check", catalogue(w)) == {"ok": True, "checked": 4, "known": False}
    eng.start_weight_update()
    eng.receive_weights(info(w))
    assert not eng("wsync_state")["whole"]  # loaded, not committed yet
    eng.finish_weight_update()  # the COMMIT is already there: confirmed at once
    assert eng.rx.committed == [7] and eng._catalogue is None
    assert eng("wsync_state") == {"whole": True, "holds": "version 7", "open": False}
    assert torch.equal(model.layers[1].weight, w["layers.1.weight"])


def test_staged_abandon_is_whole_and_its_commit_loads_the_version(monkeypatch, caplog):
    w = layer_weights(4)
    eng, model, before = layer_engine(monkeypatch, "staged", w, ABORTED)
    with caplog.at_level("INFO", logger="wsync.vllm"):
        with pytest.raises(RuntimeError, match="aborted"):
            eng.receive_weights(info({**w, "layers.9.weight": w["layers.0.weight"]}))  # all came, one missing
    assert len(our_lines(caplog)) == 1 and "as before the update (nothing was loaded)" in our_lines(caplog)[0]
    assert eng("wsync_abandon") == {"whole": True, "open": False,
                                    "holds": "the weights it started with (nothing of the failed update was loaded)"}
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n
    eng.rx = _Receiver(w, commit_event(4))  # the next update: whole, committed
    eng.start_weight_update()
    eng.receive_weights(info(w))
    assert eng("wsync_state")["whole"] is True and model.layers[0].weight.equal(before["layers.0.weight"])
    eng.finish_weight_update()  # the COMMIT is already there: the staged update loads, then is confirmed
    assert eng("wsync_state") == {"whole": True, "holds": "version 4", "open": False}
    assert torch.equal(model.layers[0].weight, w["layers.0.weight"])


def test_in_place_a_tensor_placed_before_the_failure_makes_a_mix(monkeypatch):
    w = checkpoint(8)
    placed = SimpleNamespace(kind=wsync.EventKind.BUCKET, tensors=[_View("head", w["head"], placed=True)])
    eng, model = _engine_of(monkeypatch, _Receiver(placed, ABORTED), num_senders=1)
    with pytest.raises(RuntimeError, match="aborted"):
        eng.receive_weights(info({"head": w["head"], "norm": w["norm"]}))
    state = eng("wsync_abandon")
    assert state["whole"] is False and "1 tensor(s) hold the failed update's weights (head)" in state["holds"], state


def test_open_follows_vllms_worker_and_abandon_ends_an_update_left_open(monkeypatch, caplog):
    """open: True once /start_weight_update returned, False once /update_weights raised or
    /finish_weight_update returned; wsync_abandon ends the engine's update, not vLLM's."""
    w = layer_weights(5)
    eng, model, before = layer_engine(monkeypatch, "layerwise", {"layers.0.weight": w["layers.0.weight"]})
    eng.receive_weights(info({"layers.0.weight": w["layers.0.weight"]}))  # then the trainer failed elsewhere
    state = eng("wsync_state")
    assert state["open"] is True and state["whole"] is False and "an open update" in state["holds"], state
    with caplog.at_level("INFO", logger="wsync.vllm"):
        state = eng("wsync_abandon")
    assert state == {"whole": True, "open": True,
                     "holds": "the weights it started with (nothing of the failed update was loaded)"}, state
    assert not eng.in_update and len(our_lines(caplog)) == 1 and "abandoned" in our_lines(caplog)[0]
    assert eng("wsync_abandon") == state  # a second call: the same
    eng.finish_weight_update()  # what the trainer sends since open is True: ends vLLM's side only
    assert eng._waiter is None and len(our_lines(caplog)) == 1  # no COMMIT awaited, no second line
    assert eng("wsync_state") == {**state, "open": False}
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n
    # a request vLLM's worker cannot parse also ends both sides' update
    eng.start_weight_update()
    assert eng("wsync_state")["open"] is True
    with pytest.raises(ValueError, match="same length"):
        eng.update_weights({"names": ["layers.0.weight"], "dtype_names": [], "shapes": []})
    assert not eng.in_update and eng("wsync_state")["open"] is False


def test_a_trainer_gone_between_requests_ends_the_update_here_with_one_line(monkeypatch, caplog):
    """Between two /update_weights the engine watches its receiver: the trainer's death (its
    receiver fails) ends the update at once, as a failure: layer 0, complete, keeps the new
    weights; layer 1, which got its weight only, its previous ones; the model leaves vLLM's
    reload (a POST /resume is safe); one log line says so; vLLM's own update stays open (the next
    trainer's reset finishes it). A bucket the watcher sees first is kept for its request, and it
    watches no further until that request."""
    w = layer_weights(3)
    layer0 = {n: w[n] for n in ("layers.0.weight", "layers.0.bias")}
    eng, model, before = layer_engine(monkeypatch, "layerwise", start=False)
    eng.rx = _Receiver(layer0, {"layers.1.weight": w["layers.1.weight"]}, watchable=True)
    with caplog.at_level("INFO", logger="wsync.vllm"):
        eng.start_weight_update()  # (the watcher starts)
        deadline = time.monotonic() + 10
        while len(eng._early) < 2 and time.monotonic() < deadline:  # the first bucket before its request
            time.sleep(0.01)
        time.sleep(0.3)  # (the watcher stopped at that bucket: it takes no second one)
        assert sorted(eng._early) == ["layers.0.bias", "layers.0.weight"] and len(eng.rx.events) == 1
        eng.receive_weights(info(layer0))  # from what the watcher kept: layer 0 complete
        eng.receive_weights(info({"layers.1.weight": w["layers.1.weight"]}))  # layer 1 short of its bias
        eng.rx.events.append(wsync.PeerFailedError("the sender closed its connection (process died?)"))
        eng._watch()  # (what a route does last)
        deadline = time.monotonic() + 10
        while eng.in_update and time.monotonic() < deadline:
            time.sleep(0.01)
        eng._unwatch()  # (the watcher's end of the update is over once it returned)
    assert not eng.in_update
    lines = our_lines(caplog)
    assert len(lines) == 1 and "between requests" in lines[0] and "process died" in lines[0] and \
        "a mix of two versions" in lines[0] and "POST /resume" in lines[0], lines
    assert torch.equal(model.layers[0].weight, w["layers.0.weight"])
    assert torch.equal(model.layers[1].weight, before["layers.1.weight"])
    assert not any(p.is_meta for p in model.parameters())
    state = eng("wsync_state")
    assert state["whole"] is False and state["open"] is True, state
