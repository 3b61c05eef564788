"""The `wsync` weight-transfer engine that runs inside each vLLM worker.

Lifecycle, as vLLM's worker calls it (one HTTP route of the server each; the trainer's C `vllm`
adapter with adapter.backend=wsync sends them):
  /init_weight_transfer_engine  init_transfer_engine: join the trainer's group as a wsync receiver,
                                rank = dp_index * (TP*PP) + worker rank + rank_offset
  /start_weight_update          start_weight_update: answer the previous COMMIT first, then open
                                the update (layerwise reload: see load modes)
  /update_weights (per bucket)  receive_weights: take wsync events until every tensor the request
                                names has arrived; load what was not placed in place
  /finish_weight_update         finish_weight_update: finish loading, then a helper thread waits for
                                the trainer's COMMIT and confirms it (the trainer sends COMMIT only
                                after this route answered)
  /shutdown_weight_transfer_engine  shutdown: leave the group

After a failure (the trainer aborted or died, a tensor arrived that the request did not name, a
timeout) the update is ended here, never left half open: vLLM's worker does not call
finish_weight_update after receive_weights raised, and a model left in layerwise reload holds
meta tensors (the next generation kills the engine). Layers that got all their tensors keep the
new weights; a layer that got part of them keeps its previous weights (vLLM's own finalize would
process it from uninitialized memory). The engine keeps serving; the trainer's next group init
resets the server (finish, shutdown, resume) and a new update replaces everything.

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
  auto       the same as layerwise (kept as a name for the default).
Other settings: WSYNC_VLLM_TIMEOUT_MS (default 60000: the join, and each wait for the trainer's next
bucket inside /update_weights; the COMMIT after /finish_weight_update is awaited without a limit
(it comes after every server's finish), until it, an abort, the group's end or a new init),
WSYNC_VLLM_OPTIONS ("key=value,key=value": receiver options such as transport.*).
"""
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
        self._join_waiter(stop=True)
        if self.in_update:
            self._finish_loading(failed=True)
        if self.rx is not None:
            self.rx.close()
            self.rx = None

    # ---- one update ----

    def _require_receiver(self):
        if self.rx is None:
            raise RuntimeError("wsync weight transfer is not initialized: POST /init_weight_transfer_engine first")

    def start_weight_update(self):
        self._require_receiver()
        self._join_waiter(stop=False)  # the previous COMMIT is answered before a new update opens
        self._staged = {}
        self._early = {}
        if self.mode == "layerwise":
            from vllm.model_executor.model_loader.reload import initialize_layerwise_reload
            initialize_layerwise_reload(self.model)
            # Tensors the reload leaves live (biases: never on the meta device) are written as
            # their tensors arrive; keep their values to put back if the update fails.
            self._live = {n: p.detach().clone() for n, p in self.model.named_parameters() if not p.is_meta}
        self.in_update = True

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # The base class synchronizes "the accelerator"; only a CUDA device has work to wait for.
        self.receive_weights(self.parse_update_info(update_info))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def receive_weights(self, update_info):
        self._require_receiver()
        if not self.in_update:
            raise RuntimeError("wsync: /update_weights outside an update (POST /start_weight_update first)")
        pending = {n: (d, tuple(s)) for n, d, s in zip(update_info.names, update_info.dtype_names,
                                                        update_info.shapes)}
        try:
            self._register_matching(update_info)
            self._load_early(pending)
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
            logger.error("wsync: rank %s: update failed: %s; layers that got all their tensors keep the new "
                         "weights, the others their previous ones", self.rank, e)
            self._finish_after_failure()  # vLLM ends the update without calling finish_weight_update
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
        elif not placed:
            weights.append((name, value()))

    def _check_shape(self, name, shape):
        """Refuse, before anything of its bucket loads, a tensor whose shape is not the served
        checkpoint's (a transposed tensor otherwise fails deep in the model's loader, naming no
        tensor, after other tensors landed)."""
        want = self._wanted.get(name)
        if want is not None and tuple(want[1]) != tuple(shape):
            raise ValueError("wsync: tensor '%s' has shape %s but the model wants %s (the served checkpoint's "
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
        self._live = {n: p.detach().clone() for n, p in self.model.named_parameters() if not p.is_meta}
        self.in_update = True
        self.mode = "layerwise"  # _finish_loading's failure path is the layerwise one
        from vllm.config import set_current_vllm_config  # the worker's own routes load inside it
        try:
            with set_current_vllm_config(self.vllm_config):
                self.model.load_weights(list(staged.items()))
                self._finish_loading(failed=False)
        except BaseException:
            self._finish_after_failure()
            raise
        finally:
            self.mode = "staged"

    def finish_weight_update(self):
        self._require_receiver()
        # A normal finish comes before the trainer sends COMMIT, so nothing is waiting here. After
        # a failure the trainer's abort came first (it tells the receivers, then ends the engines'
        # update), or the trainer is gone (a new trainer's init ends what it left).
        failure, committed = self._pending_outcome()
        if self._early and failure is None:  # many senders: came, but no /update_weights named them
            early, self._early = sorted(self._early), {}
            self._staged = {}
            if self.in_update:
                self._finish_loading(failed=True)
            raise ValueError("wsync: %d tensor(s) arrived that no /update_weights of this update named: %s" %
                             (len(early), ", ".join(early[:5])))
        self._early = {}
        if self.mode == "staged":
            # Nothing loads here: a finish also comes from a new trainer's reset after the old one
            # died, and nothing tells it apart from the trainer's own finish. Only the COMMIT does:
            # the staged update loads when it comes (the server is paused until the trainer saw
            # every worker commit), and a finish without a COMMIT after it drops it.
            self.in_update = False
            if failure is not None:
                self._staged = {}
            else:
                self._check_staged_names()  # raises (naming the tensors) before the trainer commits
        elif self.in_update:
            self._finish_loading(failed=failure is not None)
        if failure is not None:
            self.last_outcome = failure
            logger.warning("wsync: rank %s: the update ended without a commit: %s", self.rank, failure)
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
        logger.info("wsync: rank %s committed version %d", self.rank, version)

    def _finish_after_failure(self):
        """_finish_loading(failed=True) from inside an except block: a failure of its own (vLLM's
        private layerwise state not what CHECKED_VLLM had) is logged, never raised in place of the
        update's own failure, which the caller re-raises."""
        try:
            self._finish_loading(failed=True)
        except Exception as e:
            logger.error("wsync: rank %s: after the failure, putting back the previous weights failed too (%s: %s)",
                         self.rank, type(e).__name__, e)

    def _finish_loading(self, failed=False):
        self.in_update = False
        self._staged = {}
        self._early = {}
        if self.mode == "layerwise":
            from vllm.model_executor.model_loader.reload import finalize_layerwise_reload
            # After a failure every layer that got part of its tensors keeps its previous weights;
            # on any finish, one that lacks a whole piece does (a finish may be a new trainer's
            # reset after the old one died, which nothing tells apart from the trainer's finish).
            partial = self._forget_partial_layers(only_incomplete=not failed)
            finalize_layerwise_reload(self.model, self.model_config)
            self._put_back_live(partial)
        self._live = {}

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
            logger.warning("wsync: rank %s: %d layer(s) got part of their tensors before the failure and keep "
                           "their previous weights: %s", self.rank, len(restored), ", ".join(restored[:8]))
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
                if ev.kind == wsync.EventKind.COMMIT:
                    self._load_staged()  # staged: the update reaches the model now, before the confirm
                    self.rx.commit(ev.version)
                    self._committed(ev.version)
                else:
                    self._staged = {}  # staged: never loaded
                    self.last_outcome = ev.kind.name.lower()
                    logger.warning("wsync: rank %s: after the update the trainer sent %s, not COMMIT", self.rank,
                                   ev.kind.name)
                return
            self._staged = {}
            self.last_outcome = "stopped before the trainer's COMMIT"
        except BaseException as e:  # a staged load that failed is not confirmed: the trainer sees no commit
            self._staged = {}
            self.last_outcome = str(e)
            logger.error("wsync: rank %s: waiting for the trainer's COMMIT: %s", self.rank, e)

    def _join_waiter(self, stop):
        w, self._waiter = self._waiter, None
        if w is None:
            return
        if stop:
            self._stop.set()
        w.join()
