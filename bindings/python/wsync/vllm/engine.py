"""The `wsync` weight-transfer engine that runs inside each vLLM worker.

Lifecycle, as vLLM's worker calls it (one HTTP route of the server each; the trainer's C `vllm`
adapter with adapter.backend=wsync sends them):
  /init_weight_transfer_engine  init_transfer_engine: join the trainer's group as a wsync receiver,
                                rank = dp_index * (TP*PP) + worker rank + rank_offset
  /collective_rpc wsync_check   (before /start_weight_update, while the server still serves) check the
                                whole next update's catalogue; see "The trainer's calls" below
  /start_weight_update          start_weight_update: answer the previous COMMIT first, then open
                                the update (layerwise reload: see load modes)
  /update_weights (per bucket)  receive_weights: take wsync events until every tensor the request
                                names has arrived; load what was not placed in place
  /finish_weight_update         finish_weight_update: finish loading, then a helper thread waits for
                                the trainer's COMMIT and confirms it (the trainer sends COMMIT only
                                after this route answered)
  /collective_rpc wsync_abandon (after a failed update, instead of /finish_weight_update) end the
                                update if still open here; say what the worker holds
  /collective_rpc wsync_state   say what the worker holds, ending nothing
  /shutdown_weight_transfer_engine  shutdown: leave the group

The trainer's calls: vLLM's dev route `POST /collective_rpc {"method": "weight_transfer_engine",
"args": [what, ...]}` calls this engine object in every worker (__call__; string arguments only);
each worker's dict comes back in {"results": [...]}.
  wsync_check CATALOGUE  CATALOGUE is JSON {"names", "dtype_names", "shapes"}: the full tensors of
      the next update, in checkpoint names. Nothing of the model is touched. Every entry is
      checked (a name the served checkpoint has, its shape, a dtype that is the checkpoint's or the
      served model's): {"ok": true, "checked": n, "known": whether the served checkpoint's names
      were known} or {"ok": false, "refused": "<one line naming the bad tensors>"}. A checked
      catalogue binds the coming update: /update_weights refuses, before anything of that bucket
      loads, a tensor it does not hold or holds with another dtype or shape. It is forgotten when
      that update ends. Refused while an update is open.
  wsync_abandon  ends an update still open here as a failure (as below), then answers as
      wsync_state; calling it again changes nothing.
  wsync_state    {"whole": every parameter holds one version (the last committed one, or the
      weights the server started with), "holds": those words ("version 3", "a mix of two
      versions: ..."), "open": vLLM's worker still counts a weight update as active (then the
      trainer sends /finish_weight_update to end it there; after a failed /update_weights it
      does not)}.

After a failure (the trainer aborted or died, a tensor arrived that the request did not name, a
timeout) the update is ended here, never left half open: vLLM's worker does not call
finish_weight_update after receive_weights raised, and a model left in layerwise reload holds
meta tensors (the next generation kills the engine). Layers that got all their tensors keep the
new weights; a layer that got part of them keeps its previous weights (vLLM's own finalize would
process it from uninitialized memory). The server's log gets one line per failure: its cause and
what this worker holds now. Nothing of the failed update was loaded (staged mode, or no layer was
complete): it holds the previous version, whole, and may serve on. Otherwise it holds a mix of two
versions; the trainer (wsync_abandon tells it which) leaves generation paused unless its group has
engine_resume_on_failure=1, until a complete version is published (or POST /resume serves the mix).
The trainer's next group init resets the server (finish, shutdown, resume) and a new update
replaces everything.

Load modes (environment variable WSYNC_VLLM_LOAD in the vLLM server's environment):
  layerwise  (default) vLLM's layerwise reload, as its own NCCL backend does: every tensor goes
             through the model's load_weights and each layer is processed again once complete
             (process_weights_after_loading). Right for every model: vLLM's CPU backend repacks
             linear weights (and drops the originals), quantized models re-quantize, and some
             models' load_weights transform tensors that keep their name and shape (GPT-2
             transposes its Conv1D weights, BLOOM reorders query_key_value, some norms add an
             offset).
  in_place   opt-in, zero-copy: a tensor whose name, dtype and shape equal a model parameter's
             (announced by /update_weights before its bucket moves) is registered with the
             receiver and lands straight in it; the rest go through load_weights (stacked q/k/v,
             gate/up, tensor-parallel shards, a padded vocabulary). No processing after loading.
             Only for models whose load_weights copies such tensors as they are and whose layers
             need no processing after loading (e.g. an unquantized Llama or Qwen2 on CUDA).
  staged     every tensor is kept aside (a host copy) until the trainer's COMMIT, then loaded in one
             layerwise reload: a failed update never touches the model.
  auto       the same as layerwise (kept as a name for the default).
Other settings: WSYNC_VLLM_TIMEOUT_MS (default 60000: the join, and each wait for the trainer's next
bucket inside /update_weights; the COMMIT after /finish_weight_update is awaited without a limit
(it comes after every server's finish), until it, an abort, the group's end or a new init),
WSYNC_VLLM_OPTIONS ("key=value,key=value": receiver options such as transport.*).
"""
import json
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import torch
from vllm.distributed.weight_transfer.base import (WeightTransferEngine, WeightTransferInitInfo,
                                                   WeightTransferUpdateInfo)

import wsync

logger = logging.getLogger("wsync.vllm")

# The vLLM releases whose private layerwise-reload state (LayerReloadingInfo: load_numel,
# load_numel_total, loaded_weights, can_load) this backend reads and writes; checked by
# tests/vllm (scripts/vllm-setup.sh installs it).
CHECKED_VLLM = "0.32.0"
_LAYERWISE_FIELDS = ("load_numel", "load_numel_total", "loaded_weights", "can_load")
MODES = ("auto", "layerwise", "in_place", "staged")
# What the trainer calls through POST /collective_rpc {"method": "weight_transfer_engine", ...}.
CALLS = ("wsync_check", "wsync_abandon", "wsync_state")
STARTED_WITH = "the weights it started with"

# safetensors header dtypes -> torch dtype names
_SAFETENSORS_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16", "U32": "uint32",
                       "I32": "int32", "U64": "uint64", "I64": "int64", "F16": "float16", "BF16": "bfloat16",
                       "F32": "float32", "F64": "float64", "C64": "complex64", "F8_E4M3": "float8_e4m3fn",
                       "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu"}


def _dtype_name(d):
    """A torch dtype name ("bfloat16") for a safetensors header dtype ("BF16"), a torch dtype or
    a torch dtype name (with or without "torch."); None when it names none."""
    if isinstance(d, torch.dtype):
        return str(d)[len("torch."):]
    if not isinstance(d, str):
        return None
    if d in _SAFETENSORS_DTYPES:
        return _SAFETENSORS_DTYPES[d]
    t = getattr(torch, d[len("torch."):] if d.startswith("torch.") else d, None)
    return str(t)[len("torch."):] if isinstance(t, torch.dtype) else None


def _is_float(name):
    t = getattr(torch, name, None) if isinstance(name, str) else None
    return isinstance(t, torch.dtype) and t.is_floating_point


def _first_few(items, n=3):
    """'a; b; c; and 4 more'"""
    return "; ".join(items[:n]) + ("; and %d more" % (len(items) - n) if len(items) > n else "")


def _names(names, n=4):
    return ", ".join(names[:n]) + (", and %d more" % (len(names) - n) if len(names) > n else "")


class _QuietFinalize(logging.Filter):
    def filter(self, record):
        return "Failed to load weights" not in record.getMessage()


def _checkpoint_shapes(model_path):
    """{name: (dtype name, shape)} of the served checkpoint's safetensors files, read from their
    headers only (8-byte length, then JSON): the names and shapes a trainer must send. {} when the
    model is not a local folder of safetensors files."""
    import glob
    import json
    import struct
    out = {}
    for f in sorted(glob.glob(os.path.join(str(model_path or ""), "*.safetensors"))):
        try:
            with open(f, "rb") as fh:
                n = struct.unpack("<Q", fh.read(8))[0]
                header = json.loads(fh.read(n))
        except (OSError, ValueError, struct.error):
            return {}
        for name, v in header.items():
            if name != "__metadata__":
                out[name] = (v.get("dtype"), tuple(v.get("shape", ())))
    return out


def _lacks_a_piece(layer, info):
    """True when a layer in layerwise reload got part of its tensors but lacks a whole one: a
    fused parameter (q/k/v, gate/up: the layer's output_sizes) that got only some of its shards,
    or a parameter on the meta device that got nothing (vLLM would fill it with uninitialized
    memory). A layer short only by padding lacks none. The live `bias` is left out: a checkpoint
    without it leaves its previous values, as vLLM does."""
    shards = {}
    for pname, args in info.loaded_weights:
        shards.setdefault(pname, set()).add(args.arguments.get("loaded_shard_id"))
    pieces = len(getattr(layer, "output_sizes", None) or ()) or 1
    for pname, got in shards.items():
        if None not in got and len(got) < pieces:
            return True
    return any(p.is_meta and n not in shards for n, p in layer._parameters.items() if p is not None and n != "bias")


@dataclass
class WsyncInitInfo(WeightTransferInitInfo):
    """init_info of /init_weight_transfer_engine (exactly what the C vllm adapter sends)."""
    store_addr: str      # the trainer's store, "host:port"
    rank_offset: int     # wsync rank of this server's first worker (1 + workers of servers before)
    world_size: int      # 1 + all workers of all servers
    group_name: str = "wsync"

    def __post_init__(self):
        if not isinstance(self.store_addr, str) or ":" not in self.store_addr:
            raise ValueError("init_info.store_addr must be 'host:port', got %r" % (self.store_addr,))
        for k in ("rank_offset", "world_size"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1 or v > 65536:
                raise ValueError("init_info.%s must be an integer from 1 to 65536, got %r" % (k, v))


@dataclass
class WsyncUpdateInfo(WeightTransferUpdateInfo):
    """update_info of /update_weights: the tensors of one bucket, in bucket order."""
    names: list
    dtype_names: list
    shapes: list

    def __post_init__(self):
        n = len(self.names)
        if len(self.dtype_names) != n or len(self.shapes) != n:
            raise ValueError("update_info: names, dtype_names and shapes must have the same length "
                             "(%d, %d, %d)" % (n, len(self.dtype_names), len(self.shapes)))
        if len(set(self.names)) != n:
            raise ValueError("update_info.names holds a name twice")


def _receiver_options():
    text = os.environ.get("WSYNC_VLLM_OPTIONS", "").strip()
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise ValueError("WSYNC_VLLM_OPTIONS: '%s' is not key=value" % item)
        out[k.strip()] = v.strip()
    return out


def _env_int(name, default):
    v = os.environ.get(name, "")
    try:
        return int(v) if v else default
    except ValueError:
        raise ValueError("%s must be an integer, got %r" % (name, v)) from None


class WsyncWeightTransferEngine(WeightTransferEngine[WsyncInitInfo, WsyncUpdateInfo]):
    init_info_cls = WsyncInitInfo
    update_info_cls = WsyncUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, config, vllm_config, device, model):
        super().__init__(config, vllm_config, device, model)
        mode = os.environ.get("WSYNC_VLLM_LOAD", "auto")
        if mode not in MODES:
            raise ValueError("WSYNC_VLLM_LOAD must be one of %s, got %r" % (", ".join(MODES), mode))
        # Only layerwise is right for every model (see the top of this file): in_place is asked for.
        self.mode = "layerwise" if mode == "auto" else mode
        self.timeout_ms = _env_int("WSYNC_VLLM_TIMEOUT_MS", 60000)
        if self.timeout_ms <= 0:
            raise ValueError("WSYNC_VLLM_TIMEOUT_MS must be a positive number of milliseconds, got %d" %
                             self.timeout_ms)
        self.rx = None
        self.rank = None
        self.in_update = False
        self.updates_committed = 0
        self.last_outcome = None  # what the commit helper saw last: "committed N", "aborted", an error
        self._live = {}  # layerwise: values of the tensors the reload leaves live, from the update's start
        self._waiter = None
        self._stop = threading.Event()
        self._params = {}  # in_place: the model's parameters by name
        self._staged = {}  # staged: the update's tensors (host copies) until /finish_weight_update
        self.staged_bytes_peak = 0
        try:
            self._wanted = _checkpoint_shapes(vllm_config.model_config.model)
        except AttributeError:
            self._wanted = {}
        self._registered = set()  # in_place: the names registered with the receiver
        self._can_register = True
        self.num_senders = 1  # the trainer's senders (many senders: see receive_weights)
        self._early = {}  # many senders: tensors that came before the /update_weights naming them
        self._catalogue = None  # {name: (dtype name, shape)} of the coming update, from wsync_check
        self._lock = threading.Lock()  # the trainer's calls and the commit helper's load
        self._watcher = None  # between the routes of an open update: notices the trainer's end
        self._watch_stop = threading.Event()
        self._watched_commit = None  # a COMMIT the watcher took (a trainer that did not wait for the finish)
        self._last_failure = None  # the cause of the last failure logged (for a request that comes after it)
        # What the model holds (wsync_state): every parameter one version (whole), and in words.
        self._whole = True
        self._base = STARTED_WITH  # the last version it held whole
        self._holds = self._holds_log = STARTED_WITH  # the words of wsync_state; of the failure's log line
        self._uncommitted = None  # (count, unit, before): loaded by a finish, its COMMIT not seen yet
        self._open = False  # vLLM's worker counts a weight update as active (see wsync_state)
        self._ended_by_failure = False  # the update was ended here by a failure before any finish
        self._reloading = set()  # layerwise: the modules the update's reload covers
        self._touched = set()  # in_place: the tensors of the update written into the model

    # ---- init / shutdown ----

    def init_transfer_engine(self, init_info):
        self._close_receiver()
        pc = self.parallel_config
        rank = pc.data_parallel_index * pc.world_size + pc.rank + init_info.rank_offset
        if not 1 <= rank < init_info.world_size:
            raise ValueError("wsync: worker rank %d (rank_offset %d) is outside the group of %d" %
                             (rank, init_info.rank_offset, init_info.world_size))
        self.rx = wsync.Receiver(rank, init_info.store_addr, group_name=init_info.group_name,
                                 options=_receiver_options(), timeout_ms=self.timeout_ms)
        self.rank = rank
        self._registered = set()
        self._can_register = True
        self._early = {}
        self._catalogue = None  # checked for the previous trainer's update
        state = self.rx.state()
        self.num_senders = state.num_senders
        if state.planned:
            # The trainer's senders plan and wait for each worker's needs before a batch moves, but
            # this worker's next() runs only inside /update_weights: say now that it takes every
            # tensor whole (vLLM's loader wants whole tensors).
            self.rx.register({})
        self._params = dict(self.model.named_parameters()) if self.mode == "in_place" else {}
        logger.info("wsync: worker joined group '%s' at %s as rank %d of %d (load mode %s)", init_info.group_name,
                    init_info.store_addr, rank, init_info.world_size, self.mode)

    def _register_matching(self, update_info):
        """in_place: before a bucket's bytes arrive, register the parameters whose name, dtype and
        shape equal one of its tensors (so they land there, no copy). A checkpoint tensor of
        another shape under a parameter's name (a tensor-parallel shard, a padded vocabulary) is
        not registered: it goes through load_weights, which knows how to place it."""
        if self.mode != "in_place" or not self._can_register:
            return
        new = []
        for name, dtype_name, shape in zip(update_info.names, update_info.dtype_names, update_info.shapes):
            p = self._params.get(name)
            if (p is None or name in self._registered or str(p.dtype) != "torch." + str(dtype_name)
                    or list(p.shape) != list(shape) or p.numel() == 0 or not p.is_contiguous()):
                continue
            new.append((name, p.data))
        if not new:
            return
        try:
            self.rx.register(new)
        except wsync.UnsupportedError as e:  # e.g. a host transport and parameters in CUDA memory
            self._can_register = False
            logger.warning("wsync: rank %s: the transport cannot write into the model's parameters (%s); every "
                           "tensor goes through load_weights", self.rank, e)
            return
        self._registered.update(n for n, _ in new)

    def shutdown(self):
        self._close_receiver()

    def _close_receiver(self):
        self._unwatch()
        self._join_waiter(stop=True)
        self._catalogue = None
        if self.in_update:
            self._finish_loading(failed=True)
            self._log_failure("the update was still open at a new init or shutdown (its trainer is gone)")
        if self.rx is not None:
            self.rx.close()
            self.rx = None

    # ---- the trainer's calls (POST /collective_rpc {"method": "weight_transfer_engine", "args": [what, ...]}) ----

    def __call__(self, what, *args):
        """vLLM's worker runs getattr(worker, "weight_transfer_engine")(*args): see CALLS and the
        top of this file. The answers are dicts (JSON in the route's results, one per worker)."""
        if what == "wsync_abandon":
            self._unwatch()
        with self._lock:
            if what == "wsync_check":
                if len(args) != 1:
                    return self._refuse("wsync_check takes one argument (the catalogue as JSON text), got %d" %
                                        len(args))
                return self._check(args[0])
            if what == "wsync_abandon" and not args:
                return self._abandon()
            if what == "wsync_state" and not args:
                return self._state()
        raise ValueError("wsync: the weight_transfer_engine call takes one of %s (wsync_check with the catalogue "
                         "as JSON text, the others without arguments), got %r with %d argument(s)" %
                         (", ".join(CALLS), what, len(args)))

    def _refuse(self, why):
        logger.error("wsync: rank %s: wsync_check refused the next update: %s", self.rank, why)
        return {"ok": False, "refused": why}

    def _check(self, text):
        """wsync_check: the whole next update's catalogue, against the served model; touches nothing
        of it. Never raises: a bad catalogue is refused in words."""
        if self.in_update:  # the open update keeps the catalogue it had
            return self._refuse("an update is open (wsync_check comes before /start_weight_update)")
        self._catalogue = None
        try:
            problems, catalogue, n = self._judge(text)
        except Exception as e:  # a bug here refuses the update, it never fails the call
            problems, catalogue, n = ["the catalogue could not be checked (%s: %s)" % (type(e).__name__, e)], None, 0
        if problems:
            return self._refuse(problems[0] if catalogue is None else
                                "%d of the update's %d tensor(s) do not fit the served model: %s" %
                                (len(problems), n, _first_few(problems)))
        self._catalogue = catalogue
        logger.info("wsync: rank %s: the next update's catalogue of %d tensor(s) fits the served model%s", self.rank,
                    len(catalogue), "" if self._wanted else " (its checkpoint's names unknown: only the entries' form was checked)")
        return {"ok": True, "checked": len(catalogue), "known": bool(self._wanted)}

    def _judge(self, text):
        """([problem, ...], {name: (dtype name, shape)}, number of entries); the catalogue None when
        it could not be read at all (then one problem says why)."""
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8", "replace")
        if not isinstance(text, str):
            return ["the catalogue must be JSON text, got %s" % type(text).__name__], None, 0
        try:
            doc = json.loads(text)
        except ValueError as e:
            return ["the catalogue is not JSON (%s)" % e], None, 0
        keys = ("names", "dtype_names", "shapes")
        if not isinstance(doc, dict) or not all(isinstance(doc.get(k), list) for k in keys):
            return ["the catalogue must be a JSON object with the lists names, dtype_names and shapes"], None, 0
        names, dtypes, shapes = (doc[k] for k in keys)
        if not len(names) == len(dtypes) == len(shapes):
            return ["names, dtype_names and shapes must have the same length (%d, %d, %d)" %
                    (len(names), len(dtypes), len(shapes))], None, 0
        model_dtype = _dtype_name(getattr(getattr(self.vllm_config, "model_config", None), "dtype", None))
        problems, catalogue = [], {}
        for i, (name, dtype, shape) in enumerate(zip(names, dtypes, shapes)):
            if not isinstance(name, str) or not name:
                problems.append("entry %d has no name (%r)" % (i, name))
                continue
            d = _dtype_name(dtype)
            if d is None or not isinstance(dtype, str):
                problems.append("tensor '%s' has dtype %r, which is no torch dtype" % (name, dtype))
                continue
            if not isinstance(shape, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                      for x in shape):
                problems.append("tensor '%s' has shape %r, not a list of sizes" % (name, shape))
                continue
            if name in catalogue:
                problems.append("tensor '%s' is named twice" % name)
                continue
            catalogue[name] = (d, tuple(shape))
            if not self._wanted:
                continue
            want = self._wanted.get(name)
            if want is None and name == "lm_head.weight" and self._tied():
                continue  # tied to the embedding: vLLM's load_weights skips it, as from a state_dict
            if want is None:
                problems.append("tensor '%s' is not in the served checkpoint" % name)
                continue
            wrong = []
            if tuple(want[1]) != tuple(shape):
                wrong.append("shape %s but the served model wants %s" % (list(shape), list(want[1])))
            want_dtype = _dtype_name(want[0])
            if want_dtype is not None and d not in (want_dtype, model_dtype) and not (
                    _is_float(d) and _is_float(want_dtype)):  # the loader casts one float to another
                wrong.append("dtype %s but the served model wants %s" %
                             (d, " or ".join(sorted({want_dtype, model_dtype} - {None}))))
            if wrong:
                problems.append("tensor '%s' has %s" % (name, ", and ".join(wrong)))
        return problems, catalogue, len(names)

    def _tied(self):
        hf = getattr(getattr(self.vllm_config, "model_config", None), "hf_config", None)
        return bool(getattr(hf, "tie_word_embeddings", False))

    def _check_catalogue_names(self, pending):
        """/update_weights after a wsync_check: every tensor the request names must be one the
        catalogue holds, with its dtype and shape."""
        if self._catalogue is None:
            return
        bad = []
        for name, (dtype, shape) in pending.items():
            want = self._catalogue.get(name)
            d = _dtype_name(dtype) or dtype
            if want is None:
                bad.append("tensor '%s' is not in the catalogue that wsync_check accepted" % name)
            elif want != (d, tuple(shape)):
                bad.append("tensor '%s' is announced as %s%s but the checked catalogue has %s%s" %
                           (name, d, list(shape), want[0], list(want[1])))
        if bad:
            raise ValueError("wsync: /update_weights refused before any of its tensors loaded: %d tensor(s) differ "
                             "from the checked catalogue: %s" % (len(bad), _first_few(bad)))

    def _abandon(self):
        """wsync_abandon: the trainer's update failed. An update still open here ends as a failed
        one (layers that got part of their tensors keep their previous weights); vLLM's worker
        ends its own with the /finish_weight_update the trainer sends when "open" says so."""
        self._catalogue = None
        if self.in_update:
            from vllm.config import set_current_vllm_config  # as the worker's own routes load inside it
            with set_current_vllm_config(self.vllm_config):
                self._finish_after_failure("the trainer abandoned the update")
        return self._state()

    def _state(self):
        """wsync_state: {"whole", "holds", "open"} (see the top of this file)."""
        whole, holds = self._whole, self._holds
        if self.in_update and self.mode == "layerwise":
            done = self._layers_with_new_weights() or []
            whole = False
            holds = ("an open update's layerwise reload: %d layer(s) loaded so far (%s); until it ends the others "
                     "have no weights (before it, %s)" % (len(done), _names(done) or "none", holds))
        elif self.in_update and self.mode == "in_place" and self._touched:
            done = sorted(self._touched)
            whole = False
            holds = "a mix: %d tensor(s) hold the open update's weights (%s), the rest %s" % (
                len(done), _names(done), holds)
        elif self.in_update:
            holds = "%s (an update is open; nothing of it was loaded yet)" % holds
        return {"whole": bool(whole), "holds": holds, "open": bool(self._open)}

    # ---- one update ----

    def _require_receiver(self):
        if self.rx is None:
            raise RuntimeError("wsync weight transfer is not initialized: POST /init_weight_transfer_engine first")

    def start_weight_update(self):
        self._require_receiver()
        self._unwatch()
        self._watched_commit = None
        self._join_waiter(stop=False)  # the previous COMMIT is answered before a new update opens
        self._staged = {}
        self._early = {}
        self._touched = set()
        self._ended_by_failure = False
        if self.mode == "layerwise":
            from vllm.model_executor.model_loader.reload import initialize_layerwise_reload
            initialize_layerwise_reload(self.model)
            self._reloading = self._reload_modules()
            # Tensors the reload leaves live (biases: never on the meta device) are written as
            # their tensors arrive; keep their values to put back if the update fails.
            self._live = {n: p.detach().clone() for n, p in self.model.named_parameters() if not p.is_meta}
        self.in_update = True
        self._open = True  # vLLM's worker marks its update active once this returned
        self._watch()

    def update_weights(self, update_info: dict[str, Any]) -> None:
        self._unwatch()
        try:
            try:
                parsed = self.parse_update_info(update_info)
            except BaseException as e:  # vLLM ends its update: so does this engine
                if self.in_update:
                    self._finish_after_failure("/update_weights: %s" % (str(e) or type(e).__name__))
                raise
            self.receive_weights(parsed)
            # The base class synchronizes "the accelerator"; only a CUDA device has work to wait for.
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self._watch()
        except BaseException:
            self._open = False  # vLLM's worker ends its update when this raises (gpu_worker.update_weights)
            raise

    def receive_weights(self, update_info):
        self._require_receiver()
        self._unwatch()  # (update_weights did; a direct call too)
        if not self.in_update and self._ended_by_failure:
            raise RuntimeError("wsync: this update was already ended here: %s" % (self._last_failure or "it failed"))
        if not self.in_update:
            raise RuntimeError("wsync: /update_weights outside an update (POST /start_weight_update first)")
        pending = {n: (d, tuple(s)) for n, d, s in zip(update_info.names, update_info.dtype_names,
                                                        update_info.shapes)}
        try:
            self._check_catalogue_names(pending)  # before any byte of this bucket is taken
            self._register_matching(update_info)
            self._load_early(pending)
            if self.num_senders == 1 and self._early:  # one sender: the early bucket is this request's
                raise RuntimeError("wsync: tensor '%s' arrived but this /update_weights does not name it" %
                                   sorted(self._early)[0])
            while pending:
                ev = self.rx.next(self.timeout_ms)
                if ev.kind == wsync.EventKind.BUCKET:
                    self._load_bucket(ev, pending)
                elif ev.kind == wsync.EventKind.ABORTED:
                    raise RuntimeError("wsync: the trainer aborted the update")
                else:
                    raise RuntimeError("wsync: %s arrived while tensors %s of this /update_weights were still "
                                       "missing" % (ev.kind.name, sorted(pending)[:5]))
        except BaseException as e:
            self._open = False  # vLLM's worker ends its update when this raises
            # vLLM ends the update without calling finish_weight_update: end it here (one log line)
            self._finish_after_failure(str(e) or type(e).__name__)
            raise

    def _load_bucket(self, ev, pending):
        weights = []
        for t in ev.tensors:
            if t.name not in pending:
                # Many senders: each sends its boxes of the next batch as soon as the senders agreed
                # on it, so a tensor whole before the /update_weights that names it is kept (a copy,
                # or nothing when it landed in place) until that request; one never named fails
                # the finish. One sender sends only what the current request names.
                if self.num_senders > 1 and t.name not in self._early:
                    self._early[t.name] = (t.dtype, tuple(t.shape), t.placed, None if t.placed else t.copy())
                    continue
                raise RuntimeError("wsync: tensor '%s' arrived but this /update_weights does not name it" % t.name)
            # Layerwise reload keeps the tensors it is given until the layer is complete, and the
            # view expires at the next event: it (and staged) gets a copy.
            value = t.torch if self.mode == "in_place" else t.copy
            self._take(t.name, t.dtype, tuple(t.shape), t.placed, value, pending, weights)
        if weights:
            self.model.load_weights(weights)

    def _load_early(self, pending):
        """Many senders: the tensors this request names that came before it."""
        weights = []
        for name in [n for n in pending if n in self._early]:
            dtype, shape, placed, copy = self._early.pop(name)
            self._take(name, dtype, shape, placed, lambda c=copy: c, pending, weights)
        if weights:
            self.model.load_weights(weights)

    def _take(self, name, dtype, shape, placed, value, pending, weights):
        """One tensor this request named, checked against what it announced: staged, queued for
        load_weights (value() gives the tensor), or nothing more when it landed in place."""
        want = pending.pop(name)
        if want != (dtype, shape):
            raise RuntimeError("wsync: tensor '%s' arrived as %s%s but /update_weights announced %s%s" %
                               (name, dtype, list(shape), want[0], list(want[1])))
        self._check_shape(name, shape)
        if self.mode == "staged":
            self._staged[name] = value()
            return
        if self.mode == "in_place":
            self._touched.add(name)  # written in place, or loaded with this bucket
        if not placed:
            weights.append((name, value()))

    def _check_shape(self, name, shape):
        """Refuse, before anything of its bucket loads, a tensor whose shape is not the served
        checkpoint's (a transposed tensor otherwise fails deep in the model's loader, naming no
        tensor, after other tensors landed)."""
        want = self._wanted.get(name)
        if want is not None and tuple(want[1]) != tuple(shape):
            raise ValueError("wsync: tensor '%s' has shape %s but the served model wants %s (the served checkpoint's "
                             "shape of that name)" % (name, list(shape), list(want[1])))

    def _check_staged_names(self):
        """staged, at /finish_weight_update: a name the served checkpoint lacks is refused there,
        before the trainer commits (shapes were checked on arrival)."""
        if self._wanted:
            unknown = sorted(n for n in self._staged if n not in self._wanted)
            if unknown:
                self._staged = {}
                raise ValueError("wsync: the update holds %d tensor(s) the served checkpoint has no name for: %s" %
                                 (len(unknown), ", ".join(unknown[:5])))

    def _load_staged(self):
        """staged, at the trainer's COMMIT: the whole update goes into the model now, in one
        layerwise reload; until here the model was not touched."""
        staged, self._staged = self._staged, {}
        if self.mode != "staged":
            return
        nbytes = sum(t.numel() * t.element_size() for t in staged.values())
        self.staged_bytes_peak = max(self.staged_bytes_peak, nbytes)
        logger.info("wsync: rank %s: loading the staged update: %d tensors, %d bytes", self.rank, len(staged), nbytes)
        if not staged:
            return
        from vllm.model_executor.model_loader.reload import (finalize_layerwise_reload,
                                                             initialize_layerwise_reload)
        initialize_layerwise_reload(self.model)
        self._reloading = self._reload_modules()
        self._live = {n: p.detach().clone() for n, p in self.model.named_parameters() if not p.is_meta}
        self.in_update = True
        self.mode = "layerwise"  # _finish_loading's failure path is the layerwise one
        from vllm.config import set_current_vllm_config  # the worker's own routes load inside it
        try:
            with set_current_vllm_config(self.vllm_config):
                self.model.load_weights(list(staged.items()))
                self._finish_loading(failed=False)
        except BaseException as e:
            self._finish_after_failure("loading the staged update at the trainer's COMMIT: %s" %
                                       (str(e) or type(e).__name__))
            e.wsync_logged = True  # the one line of this failure is written
            raise
        finally:
            self.mode = "staged"

    def finish_weight_update(self):
        self._unwatch()
        self._finish_update()
        self._open = False  # vLLM's worker ends its update once this returned (not when it raised)

    def _finish_update(self):
        self._require_receiver()
        # A normal finish comes before the trainer sends COMMIT, so nothing is waiting here. After
        # a failure the trainer's abort came first (it tells the receivers, then ends the engines'
        # update), or the trainer is gone (a new trainer's init ends what it left).
        if not self.in_update and self._ended_by_failure:
            # The update failed and was ended here already (wsync_abandon, or a failure that vLLM's
            # worker did not see end its update): this finish only ends vLLM's side of it.
            logger.info("wsync: rank %s: /finish_weight_update after the failed update was ended here", self.rank)
            return
        failure, committed = self._pending_outcome()
        if self._early and failure is None:  # many senders: came, but no /update_weights named them
            early, self._early = sorted(self._early), {}
            msg = "%d tensor(s) arrived that no /update_weights of this update named: %s" % (
                len(early), ", ".join(early[:5]))
            if self.in_update:
                self._finish_after_failure(msg)  # in_place: an early tensor placed counts as loaded
            self._staged = {}
            self._ended_by_failure = True
            raise ValueError("wsync: " + msg)
        self._early = {}
        if self.mode == "staged":
            # Nothing loads here: a finish also comes from a new trainer's reset after the old one
            # died, and nothing tells it apart from the trainer's own finish. Only the COMMIT does:
            # the staged update loads when it comes (the server is paused until the trainer saw
            # every worker commit), and a finish without a COMMIT after it drops it.
            self.in_update = False
            self._catalogue = None
            if failure is not None:
                self._staged = {}
            else:
                try:
                    self._check_staged_names()  # raises (naming the tensors) before the trainer commits
                except ValueError as e:
                    self._ended_by_failure = True
                    self._note_loaded([], "tensor(s)", failed=True)
                    self._log_failure(str(e))
                    raise
        elif self.in_update:
            self._finish_loading(failed=failure is not None)
        if failure is not None:
            self.last_outcome = failure
            if self.mode == "staged":
                self._note_loaded([], "tensor(s)", failed=True)
            self._log_failure("the update ended without a commit: %s" % failure)
            return
        if committed is not None:  # a trainer that did not wait for this route: confirm it now
            self._load_staged()
            self.rx.commit(committed)
            self._committed(committed)
            return
        # The trainer sends COMMIT once this route answered: confirm it in the background; the
        # next call into this engine waits for that first.
        self._stop.clear()
        self._waiter = threading.Thread(target=self._await_commit, name="wsync-commit-r%s" % self.rank, daemon=True)
        self._waiter.start()

    def _pending_outcome(self):
        """(what ended the update, or None; the version of a COMMIT that already came, or None).
        Nothing has come on a normal finish: the vllm adapter sends COMMIT after this route."""
        if self._watched_commit is not None:  # a trainer that did not wait for this route: the watcher saw it
            version, self._watched_commit = self._watched_commit, None
            return None, version
        try:
            ev = self.rx.next(0)
        except wsync.TimeoutError:
            return None, None
        except wsync.WsyncError as e:
            return str(e), None
        if ev.kind == wsync.EventKind.COMMIT:
            return None, ev.version
        return "the trainer sent %s" % ev.kind.name, None

    def _committed(self, version):
        self.updates_committed += 1
        self.last_outcome = "committed %d" % version
        self._base = "version %d" % version
        self._set_held(True, self._base)
        logger.info("wsync: rank %s committed version %d", self.rank, version)

    def _finish_after_failure(self, cause):
        """End the open update as a failed one (_finish_loading(failed=True)), then write the one
        line this failure leaves in the server's log: `cause`, what this worker holds now, what to
        do. Called from inside except blocks: a failure of its own (vLLM's private layerwise state
        not what CHECKED_VLLM had) goes into that line, never raised in place of the update's own
        failure, which the caller re-raises."""
        try:
            self._finish_loading(failed=True)
        except Exception as e:
            self._whole, self._uncommitted = False, None
            self._holds = self._holds_log = (
                "weights it cannot name: after the failure, putting back the previous weights failed too (%s: %s)" %
                (type(e).__name__, e))
        self._log_failure(cause)

    def _log_failure(self, cause):
        cause = cause[len("wsync: "):] if cause.startswith("wsync: ") else cause
        self._last_failure = cause
        if self._whole:
            what = "it holds %s, as before the update (nothing was loaded)" % self._base
        else:
            what = ("it holds %s: its trainer leaves generation paused (unless its group has "
                    "engine_resume_on_failure=1); publish a complete version, or POST /resume to serve %s" %
                    (self._holds_log, "the mix" if self._uncommitted is None else "it"))
        logger.error("wsync: rank %s: update failed: %s; %s", self.rank, cause, what)

    def _finish_loading(self, failed=False):
        self.in_update = False
        self._catalogue = None  # it was for this update
        held = (self._whole, self._holds, self._holds_log, self._uncommitted)
        if failed:
            self._ended_by_failure = True
            # until the layers with new weights are known (what follows may raise)
            self._set_held(False, "weights it cannot name: the failed update's end did not complete")
        loaded, unit = [], "tensor(s)"
        self._staged = {}
        if self.mode == "in_place":
            # what this update loaded or placed; tensors that came early and landed in place; the
            # registered parameters the receiver wrote into (or began to: a failure may leave part
            # of a bucket's bytes in them) since the last commit
            loaded = sorted(self._touched | {n for n, v in self._early.items() if v[2]} | self._receiver_touched())
        self._early = {}
        self._touched = set()
        if self.mode == "layerwise":
            from vllm.model_executor.model_loader.reload import finalize_layerwise_reload
            # After a failure every layer that got part of its tensors keeps its previous weights;
            # on any finish, one that lacks a whole piece does (a finish may be a new trainer's
            # reset after the old one died, which nothing tells apart from the trainer's finish).
            partial = self._forget_partial_layers(only_incomplete=not failed)
            loaded, unit = self._layers_with_new_weights(), "layer(s)"
            # After a failure the layers that got nothing get their previous weights back, as they
            # should: vLLM's "Failed to load weights" per such layer would bury the failure's line.
            quiet = _QuietFinalize() if failed else None
            vllm_log = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
            if quiet:
                vllm_log.addFilter(quiet)
            try:
                finalize_layerwise_reload(self.model, self.model_config)
            finally:
                if quiet:
                    vllm_log.removeFilter(quiet)
            self._put_back_live(partial)
        self._live = {}
        self._reloading = set()
        self._whole, self._holds, self._holds_log, self._uncommitted = held  # then what this update left
        self._note_loaded(loaded, unit, failed)

    def _receiver_touched(self):
        """in_place: the registered tensors the receiver says it wrote into since the last commit."""
        if self.rx is None or not self._registered:
            return set()
        try:
            st = self.rx.state()
        except Exception:  # the receiver cannot say: what this engine saw stands
            return set()
        return set(st.touched) if st.buffers == wsync.Buffers.MIXED else set()

    def _reload_modules(self):
        """layerwise, right after initialize_layerwise_reload: the modules it covers (their
        reload state can_load()). A layer processed with the update's weights is reset then (it
        no longer can_load()): see _layers_with_new_weights."""
        try:
            from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info
        except ImportError:
            return set()
        return {n for n, m in self.model.named_modules() if getattr(get_layerwise_info(m), "can_load", lambda: False)()}

    def _layers_with_new_weights(self):
        """layerwise, before the finalize (and after _forget_partial_layers): the layers that hold,
        or that the finalize gives, the update's weights: processed while loading (a layer whose
        load_numel reached load_numel_total is processed, and its reload state reset), or still
        holding loaded tensors (deferred attention layers, padded layers), which the finalize
        processes. None when vLLM's reload state cannot tell."""
        try:
            from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info
        except ImportError:
            return None
        if not self._reloading:
            return None
        out = []
        for name, layer in self.model.named_modules():
            if name not in self._reloading:
                continue
            info = get_layerwise_info(layer)
            if not info.can_load() or info.load_numel > 0:
                out.append(name or "(the model's own tensors)")
        return out

    def _set_held(self, whole, holds, holds_log=None):
        self._whole, self._holds, self._holds_log = whole, holds, holds_log or holds
        self._uncommitted = None

    def _note_loaded(self, loaded, unit, failed):
        """What the model holds once an update ended (failed) or finished loading (not failed):
        `loaded` names what got the update's weights (layers, or tensors in place), None when
        unknown."""
        before = self._base if self._whole else "the mix it held before (%s)" % self._holds
        if loaded is None:
            self._set_held(False, "weights it cannot name: vLLM's reload state does not say which layers got the "
                                  "update's weights (over %s)" % before)
            return
        if not loaded:
            if failed and self._whole:
                self._set_held(True, "%s (nothing of the failed update was loaded)" % self._base)
            elif failed:
                self._set_held(False, "%s (nothing of the latest failed update was loaded)" % self._holds,
                               self._holds_log)
            return
        if not failed:  # its trainer commits next (then: version N) or drops it
            self._set_held(False, "the weights of an update its trainer has not committed (%d %s loaded at "
                                  "/finish_weight_update, over %s)" % (len(loaded), unit, before))
            self._uncommitted = (len(loaded), unit, before)
            return
        kind = "a mix of two versions" if self._whole else "a mix of versions"
        self._set_held(False, "%s: %d %s hold the failed update's weights (%s), the rest %s" %
                       (kind, len(loaded), unit, _names(loaded), before),
                       "%s (%d %s hold the failed update's weights: %s; the rest %s)" %
                       (kind, len(loaded), unit, _names(loaded), before))

    def _forget_partial_layers(self, only_incomplete=False):
        """A layer that got only part of its tensors would be processed from uninitialized memory
        for the rest (vLLM's finalize processes such layers, which is right only for padded
        weights). Forget what it got, so the finalize puts its previous weights back (and
        _put_back_live its live bias, which the loader wrote at once); layers processed whole
        keep the new ones. After a failure this holds for every partial layer (a padded layer,
        whose count never reaches its total, keeps its previous weights too); with
        `only_incomplete` (a finish that saw no failure) only for a layer that lacks a whole
        piece (_lacks_a_piece), since padding alone leaves a layer short too. Returns those
        layers' names."""
        try:
            from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info
        except ImportError:  # a vLLM without it: the finalize's own behaviour stands
            return []
        restored = []
        for name, layer in self.model.named_modules():
            info = get_layerwise_info(layer)
            missing = [f for f in _LAYERWISE_FIELDS if not hasattr(info, f)]
            if missing:
                raise RuntimeError("wsync: vLLM's layerwise reload state of layer '%s' has no %s (checked against "
                                   "vLLM %s): cannot put back a partly loaded layer's previous weights" %
                                   (name, ", ".join(missing), CHECKED_VLLM))
            total = info.load_numel_total
            if info.can_load() and total and 0 < info.load_numel < total and (
                    not only_incomplete or _lacks_a_piece(layer, info)):
                info.load_numel = 0
                info.loaded_weights = []
                restored.append(name)
        if restored:
            logger.info("wsync: rank %s: %d layer(s) got part of their tensors and keep their previous weights: %s",
                        self.rank, len(restored), ", ".join(restored[:8]))
        return restored

    def _put_back_live(self, layers):
        """The live tensors (biases) of `layers` get the values they had when the update began."""
        layers = set(layers)
        for name, p in self.model.named_parameters():
            old = self._live.get(name)
            if old is not None and name.rpartition(".")[0] in layers and old.shape == p.shape and old.dtype == p.dtype:
                p.data.copy_(old)

    def _await_commit(self):
        """The trainer's COMMIT comes once every server answered /finish_weight_update, so no
        deadline of this server's applies: wait until it (or an abort, the group's end, the
        trainer's death) comes, or until init/shutdown stop this thread."""
        try:
            while not self._stop.is_set():
                try:
                    ev = self.rx.next(200)
                except wsync.TimeoutError:
                    continue
                with self._lock:  # wsync_state/wsync_abandon see the model before or after this
                    if ev.kind == wsync.EventKind.COMMIT:
                        self._load_staged()  # staged: the update reaches the model now, before the confirm
                        self.rx.commit(ev.version)
                        self._committed(ev.version)
                    else:
                        self._staged = {}  # staged: never loaded
                        self.last_outcome = ev.kind.name.lower()
                        self._not_committed("the trainer sent %s after /finish_weight_update, not COMMIT" %
                                            ev.kind.name)
                return
            self._staged = {}
            self.last_outcome = "stopped before the trainer's COMMIT"
            self._not_committed("no COMMIT came before a new init or shutdown")
        except BaseException as e:  # a staged load that failed is not confirmed: the trainer sees no commit
            self._staged = {}
            self.last_outcome = str(e)
            if not getattr(e, "wsync_logged", False):
                self._log_failure("waiting for the trainer's COMMIT: %s" % (str(e) or type(e).__name__))

    def _not_committed(self, why):
        """The update a finish loaded was not committed: say so in what the model holds, and log it."""
        if self._uncommitted is not None:
            n, unit, before = self._uncommitted
            self._set_held(False, "the weights of an update its trainer did not commit (%s; %d %s loaded, over %s)" %
                           (why, n, unit, before))
            self._uncommitted = (n, unit, before)
        self._log_failure(why)

    # ---- between the routes of an open update ----

    def _watch(self):
        """Start watching the receiver while no route runs and an update is open (after
        /start_weight_update and after each /update_weights): a trainer that dies, aborts or is cut
        off between requests ends the update here at once (the model leaves vLLM's layerwise
        reload, so POST /resume is safe), with the one log line of a failure. A bucket that comes
        before its /update_weights is kept for it (watching stops there), and a COMMIT before the
        finish (a trainer that does not wait for it) for the finish."""
        self._unwatch()
        # layerwise only: its open update holds layers on the meta device (generating then kills
        # the engine), where staged and in_place hold real weights throughout; and in_place
        # registers each request's parameters before its bucket's manifest is read, which a
        # watcher's next() would read first (the bytes would land in staging, not in place).
        if not self.in_update or self.rx is None or self.mode != "layerwise":
            return
        self._watch_stop.clear()
        self._watcher = threading.Thread(target=self._watch_loop, name="wsync-watch-r%s" % self.rank, daemon=True)
        self._watcher.start()

    def _unwatch(self):
        """Every route and call stops the watcher before it touches the receiver."""
        w, self._watcher = self._watcher, None
        if w is not None:
            self._watch_stop.set()
            w.join()

    def _watch_loop(self):
        from vllm.config import set_current_vllm_config  # as the worker's own routes load inside it
        if self.device.type == "cuda":  # a new thread's current device is 0: the worker's, as its routes
            torch.cuda.set_device(self.device)
        while not self._watch_stop.is_set():
            with self._lock:
                if self._watch_stop.is_set() or not self.in_update:
                    return
                try:
                    ev = self.rx.next(0)
                except wsync.TimeoutError:
                    ev = None
                except wsync.WsyncError as e:
                    with set_current_vllm_config(self.vllm_config):
                        self._finish_after_failure("between requests: %s" % e)
                    return
                if ev is not None and ev.kind == wsync.EventKind.BUCKET:
                    # The next request's bucket came first (its /update_weights is posted as it
                    # moves): kept for it, and no more watching until that request (so one sender's
                    # early bucket is always the next request's).
                    for t in ev.tensors:  # (the view expires at the next event: a copy)
                        if t.name not in self._early:
                            self._early[t.name] = (t.dtype, tuple(t.shape), t.placed, None if t.placed else t.copy())
                    return
                if ev is not None and ev.kind == wsync.EventKind.COMMIT:
                    self._watched_commit = ev.version  # for the finish (a trainer that did not wait for it)
                    return
                if ev is not None:
                    why = "the trainer aborted the update" if ev.kind == wsync.EventKind.ABORTED else (
                        "the trainer sent %s between requests" % ev.kind.name)
                    with set_current_vllm_config(self.vllm_config):
                        self._finish_after_failure(why)
                    return
            self._watch_stop.wait(0.1)

    def _join_waiter(self, stop):
        w, self._waiter = self._waiter, None
        if w is None:
            return
        if stop:
            self._stop.set()
        w.join()
