"""The processes of tests/verl: verl's real classes in plain processes, driven the way verl's
driver drives them, without ray actors.

- Trainer ranks: a gloo world of two processes; each holds half the rows of every tensor, and
  get_per_tensor_param() gathers each tensor over gloo (collective, as FSDP's full_tensor() is).
  The checkpoint engine is made as ActorRolloutRefWorker.init_model makes it
  (verl/workers/engine_workers.py, "4. build checkpoint engine"), and the sync runs verl's
  ActorRolloutRefWorker.update_weights on an instance with those attributes (as verl's own
  tests/checkpoint_engine/test_global_steps_on_cpu.py does).
- Rollout workers: verl's CheckpointEngineWorker, made by its real __init__ (it imports
  custom_backend_module and builds the engine from the rollout config) with a server adapter
  that takes the sha256 of every tensor at once (it "copies" each as verl's adapters do).
- The driver's side: verl's CheckpointEngineManager (its __init__ and build_process_group) over
  WorkerGroup, which dispatches execute_checkpoint_engine as verl's DP_COMPUTE does (element i of
  every list argument to worker i) and answers with futures; ray.get is replaced by
  gather_results while build_process_group runs.

Each worker is a process forked from the test (which imported verl once: an import costs
~12 s here) serving calls over a pipe: ("method", args, kwargs) -> ("ok", value) or
("error", {"type", "message", "workers"}).
"""
import asyncio
import hashlib
import os
import signal
import time
import traceback
from types import SimpleNamespace

import torch

# name -> (shape, dtype); first dimensions even (two trainer ranks hold half the rows each).
# 32.2 MiB in all; lm_head (16 MiB) is larger than a 4 MB bucket.
MODEL = {"model.embed_tokens.weight": ((4096, 512), torch.bfloat16)}
for _layer in range(4):
    MODEL.update({
        "model.layers.%d.self_attn.q_proj.weight" % _layer: ((512, 512), torch.float32),
        "model.layers.%d.mlp.up_proj.weight" % _layer: ((1024, 512), torch.bfloat16),
        "model.layers.%d.mlp.down_proj.weight" % _layer: ((512, 1024), torch.float16),
        "model.layers.%d.input_layernorm.weight" % _layer: ((512,), torch.float32),
    })
MODEL.update({"lm_head.weight": ((8192, 512), torch.float32), "model.step_counter": ((2,), torch.int64)})


def full_tensor(step, i, name):
    """Tensor `name` (the i-th) of weight version `step`: a pure function of both."""
    shape, dtype = MODEL[name]
    g = torch.Generator().manual_seed(step * 7919 + i)
    if dtype == torch.int64:
        return torch.randint(0, 1 << 40, shape, generator=g, dtype=torch.int64)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def digest(t):
    return hashlib.sha256(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest()


class ShardedModel:
    """A trainer rank's engine: half the rows of every tensor; get_per_tensor_param() gathers."""

    is_param_offload_enabled = False

    def __init__(self, rank, world):
        self.rank, self.world, self.step, self.sent = rank, world, 0, []

    def get_per_tensor_param(self, **_):
        return self._gathered(), None

    def _gathered(self):
        import torch.distributed as dist
        self.sent = []
        for i, name in enumerate(MODEL):
            shape, dtype = MODEL[name]
            shard = full_tensor(self.step, i, name).chunk(self.world)[self.rank].contiguous()
            parts = [torch.empty_like(shard.reshape(-1).view(torch.uint8)) for _ in range(self.world)]
            dist.all_gather(parts, shard.reshape(-1).view(torch.uint8))  # collective: every rank walks
            full = torch.cat(parts).view(dtype).reshape(shape)
            if self.rank == 0:
                self.sent.append((name, digest(full)))
            yield name, full


class Recorder:
    """A rollout server adapter: the sha256 of each tensor, taken as it is yielded."""

    def __init__(self):
        self.got = []

    async def update_weights(self, weights, **_):
        from verl.workers.rollout.utils import ensure_async_iterator
        self.got = []
        async for name, tensor in ensure_async_iterator(weights):
            self.got.append((name, digest(tensor)))


def make_recorder_adapter(rollout_config):
    """A real BaseRollout subclass (what CheckpointEngineWorker expects) around Recorder."""
    from verl.workers.rollout import BaseRollout

    class RecordingAdapter(BaseRollout, Recorder):
        def __init__(self, config):
            BaseRollout.__init__(self, config, None, device_mesh=None)
            Recorder.__init__(self)

        async def resume(self, tags):
            pass

        async def release(self):
            pass

        async def update_weights(self, weights, **kw):
            await Recorder.update_weights(self, weights, **kw)

    return RecordingAdapter(rollout_config)


def checkpoint_engine_config(engine_kwargs, bucket_mb):
    """actor_rollout_ref.rollout.checkpoint_engine as the yaml/hydra lines of docs/VERL.md give it."""
    from omegaconf import OmegaConf
    return OmegaConf.create({"_target_": "verl.workers.config.CheckpointEngineConfig",
                             "backend": "wsync", "custom_backend_module": "wsync.verl",
                             "update_weights_bucket_megabytes": bucket_mb, "engine_kwargs": {"wsync": engine_kwargs}})


class TrainerRank:
    def __init__(self, rank, world, rendezvous, engine_kwargs, bucket_mb):
        import torch.distributed as dist
        from verl.checkpoint_engine import CheckpointEngineRegistry
        from verl.utils.config import omega_conf_to_dataclass
        from verl.utils.import_utils import import_external_libs
        from verl.workers.engine_workers import ActorRolloutRefWorker

        dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
        self.model = ShardedModel(rank, world)
        w = ActorRolloutRefWorker.__new__(ActorRolloutRefWorker)
        w.config = SimpleNamespace(rollout=SimpleNamespace(
            checkpoint_engine=checkpoint_engine_config(engine_kwargs, bucket_mb)))
        w.actor = SimpleNamespace(engine=self.model)
        # verl/workers/engine_workers.py, ActorRolloutRefWorker.init_model, "4. build checkpoint engine":
        checkpoint_engine_config_ = omega_conf_to_dataclass(w.config.rollout.checkpoint_engine)
        backend = checkpoint_engine_config_.backend
        bucket_size = checkpoint_engine_config_.update_weights_bucket_megabytes << 20
        engine_kwargs_ = checkpoint_engine_config_.engine_kwargs.get(backend, {})
        import_external_libs(checkpoint_engine_config_.custom_backend_module or None)
        w.checkpoint_engine = CheckpointEngineRegistry.new(
            backend, is_master=(dist.get_rank() == 0), bucket_size=bucket_size, **engine_kwargs_)
        self.worker = w
        self.naive = CheckpointEngineRegistry.new("naive", bucket_size=bucket_size, is_master=(dist.get_rank() == 0))
        self.colocated = Recorder()

    def execute_checkpoint_engine(self, method, *args, **kwargs):
        return self.worker.execute_checkpoint_engine(method, *args, **kwargs)

    def update_weights(self, global_steps):
        """ActorRolloutRefWorker.update_weights (mode auto: the configured backend)."""
        self.model.step = global_steps
        metrics = asyncio.run(self.worker.update_weights(global_steps=global_steps))
        return {"metrics": metrics, "sent": self.model.sent}

    def naive_sync(self, global_steps):
        """verl's `naive` backend (ColocatedCheckpointEngine): the generator handed straight to
        the rollout colocated in this process. (verl's naive path in ActorRolloutRefWorker first
        asks torch.cuda for memory figures, so it cannot run without a GPU; this is its transfer.)"""
        self.model.step = global_steps
        t0 = time.monotonic()
        per_tensor_param, _ = self.model.get_per_tensor_param()
        self.naive.send_weights(per_tensor_param, global_steps=global_steps)
        asyncio.run(self.colocated.update_weights(self.naive.receive_weights(global_steps=global_steps)))
        return {"seconds": time.monotonic() - t0, "sent": self.model.sent, "got": self.colocated.got}


class RolloutWorker:
    def __init__(self, index, rendezvous, engine_kwargs, bucket_mb):
        from verl.checkpoint_engine import CheckpointEngineWorker
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.config import CheckpointEngineConfig, RolloutConfig

        # verl's Worker reads its place from the environment (ray sets it); each rollout worker is
        # a world of one here, as in a ray actor of its own.
        os.environ.update(WORLD_SIZE="1", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="1",
                          DIST_INIT_METHOD=rendezvous)
        ce = omega_conf_to_dataclass(checkpoint_engine_config(engine_kwargs, bucket_mb), CheckpointEngineConfig)
        config = RolloutConfig(name="vllm", checkpoint_engine=ce)
        self.adapter = make_recorder_adapter(config)
        self.worker = CheckpointEngineWorker(config, None, server_adapter=self.adapter)

    def execute_checkpoint_engine(self, method, *args, **kwargs):
        return self.worker.execute_checkpoint_engine(method, *args, **kwargs)

    def update_weights(self, global_steps):
        """CheckpointEngineWorker.update_weights: receive_weights into the server adapter."""
        self.adapter.got = []
        try:
            asyncio.run(self.worker.update_weights(global_steps=global_steps))
        except BaseException as e:
            e.got = list(self.adapter.got)  # what reached the adapter before the failure
            raise
        return {"got": self.adapter.got}

    def kill_after_buckets(self, n):
        """Die (SIGKILL) once this worker's receiver handed out its n-th bucket with tensors."""
        import wsync
        real_next, seen = wsync.Receiver.next, [0]

        def next_then_die(rx, *a, **kw):
            ev = real_next(rx, *a, **kw)
            if ev.kind == wsync.EventKind.BUCKET and ev.tensors:
                seen[0] += 1
                if seen[0] == n:
                    os.kill(os.getpid(), signal.SIGKILL)
            return ev
        wsync.Receiver.next = next_then_die


def serve(conn, make):
    """A worker process's loop: build the object, then answer calls until the pipe closes."""
    try:
        obj = make()
        conn.send(("ok", os.getpid()))
    except BaseException as e:
        conn.send(("error", _error(e)))
        os._exit(1)
    while True:
        try:
            call = conn.recv()
        except EOFError:  # (other forked workers hold copies of this pipe: the driver sends None)
            os._exit(0)
        if call is None:
            os._exit(0)
        method, args, kwargs = call
        try:
            conn.send(("ok", getattr(obj, method)(*args, **kwargs)))
        except BaseException as e:
            conn.send(("error", _error(e)))


def _error(e):
    return {"type": type(e).__name__, "message": str(e), "workers": list(getattr(e, "workers", [])),
            "got": list(getattr(e, "got", [])), "traceback": traceback.format_exc()}


class WorkerDied(Exception):
    pass


class CallFailed(Exception):
    def __init__(self, info):
        super().__init__("%s: %s" % (info["type"], info["message"]))
        self.info = info


class Worker:
    """The driver's handle of one worker process. start() forks it; ready() waits until its object
    is built (trainer ranks are started together: their gloo world waits for both)."""

    def __init__(self, ctx, name, make, limit_s):
        self.name, self.limit_s = name, limit_s
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, make), name=name, daemon=True)
        self.proc.start()
        child.close()
        self._started = Future(self)
        self.pid = None

    def ready(self):
        self.pid = self._started.result()
        return self

    def stop(self):
        """Ask the process to exit (a closed pipe is not seen: forked siblings hold its other end)."""
        if self.proc.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass

    def call(self, fn, /, *args, **kwargs):
        self.conn.send((fn, args, kwargs))
        return Future(self)


class Future:
    """One call's answer, read from the worker's pipe once (calls to a worker are answered in order)."""

    def __init__(self, worker):
        self.worker = worker
        self._answer = None

    def result(self):
        if self._answer is None:
            self._answer = self._read()
        status, value = self._answer
        if status == "error":
            raise CallFailed(value)
        if status == "died":
            raise WorkerDied(value)
        return value

    def _read(self):
        w = self.worker
        if not w.conn.poll(w.limit_s):  # a hang guard, not a time assertion
            raise TimeoutError("%s gave no answer within %d s" % (w.name, w.limit_s))
        try:
            return w.conn.recv()
        except EOFError:
            w.proc.join(5)
            return "died", "%s (pid %s) died, exit code %s" % (w.name, w.proc.pid, w.proc.exitcode)

    def outcome(self):
        """("ok", value), ("error", info) or ("died", message): every worker's fate, none raised."""
        try:
            return "ok", self.result()
        except CallFailed as e:
            return "error", e.info
        except WorkerDied as e:
            return "died", str(e)


def gather_results(futures):
    """ray.get over our futures (the first failure raises, as ray's does)."""
    return [f.result() for f in futures]


class WorkerGroup:
    """What CheckpointEngineManager needs of a RayWorkerGroup: world_size, and
    execute_checkpoint_engine dispatched as verl's DP_COMPUTE (element i of each list to worker i),
    answering one future per worker. Records what each call returned (for the test to read)."""

    def __init__(self, workers):
        self.workers = list(workers)
        self.world_size = len(self.workers)
        self.last = {}  # method -> the futures of its last call (the test reads prepare()'s answers)

    def execute_checkpoint_engine(self, *args, **kwargs):
        for a in list(args) + list(kwargs.values()):
            assert isinstance(a, (list, tuple)) and len(a) == self.world_size, a
        futures = [w.call("execute_checkpoint_engine", *[a[i] for a in args], **{k: v[i] for k, v in kwargs.items()})
                   for i, w in enumerate(self.workers)]
        method = args[0][0] if args else kwargs.get("method", [None])[0]
        self.last[method] = futures
        return futures
