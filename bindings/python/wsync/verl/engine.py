"""The verl checkpoint engine `wsync`: verl's CheckpointEngine interface over wsync.Group (trainer
rank 0) and wsync.Receiver (each rollout worker).

What verl calls, and what it does here (verl 0.9.1, CheckpointEngineManager.update_weights):
  prepare()             every worker, every sync. Trainer rank 0 (is_master): the first time, start
                        the group (its store listens; the group's init waits for its first receiver
                        on a thread of its own); then report the store's address and the members.
                        Other workers: host, pid, and the rank of their receiver if it is alive.
  build_topology(...)   the driver: every rollout worker's wsync rank (topology.py).
  init_process_group()  every worker, every sync. Rank 0: wait until the group's members are
                        exactly this sync's rollout workers (a new one has joined, a removed one
                        has left). A rollout worker: join with its rank unless it is a member.
  send_weights(gen)     every trainer rank. Rank 0 sends the generator's tensors in batches of
                        about bucket_size bytes (two in flight), then commits the version; the
                        other ranks walk the generator and drop what it gives (its tensors are
                        gathered collectively, as FSDP's full_tensor() is).
  receive_weights()     each rollout worker: wsync's events until the COMMIT. receive="staged"
                        (default): keep a copy of each tensor, confirm the commit, then yield them
                        all: nothing is yielded of a version that does not commit. receive="stream":
                        yield each tensor as its bucket arrives (a view the caller copies at once).
  finalize()            every worker, every sync: nothing to free; the group and the receivers stay
                        for the next sync.
"""
import logging
import os
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Generator, Optional

import torch
from verl.checkpoint_engine import CheckpointEngine, CheckpointEngineRegistry

from . import topology
from .publisher import Publisher
from .subscriber import Subscriber
from .topology import SyncError

BACKEND = "wsync"
# The verl release whose checkpoint-engine interface this backend implements and tests
# (tests/verl, scripts/verl-setup.sh).
CHECKED_VERL = "0.9.1"
RECEIVE_MODES = ("staged", "stream")
# Group options the backend sets itself (the engine argument that sets each, or None).
_OWN_OPTIONS = {"membership": None, "init_receivers": None, "store_addr_file": None, "num_senders": None,
                "commit_quorum": "commit_quorum", "bucket_bytes": "bucket_size (update_weights_bucket_megabytes)",
                "timeout_ms": "timeout_ms", "secret_file": "secret_file"}

logger = logging.getLogger("wsync.verl")


def _node_ip() -> str:
    """This node's address as verl's own backends announce it (ray's view of the node)."""
    try:
        import ray
        return ray.util.get_node_ip_address().strip("[]")
    except Exception:  # no ray, or none of its ways found an address
        import socket
        return socket.gethostbyname(socket.gethostname())


@dataclass
class Settings:
    """The engine arguments (`checkpoint_engine.engine_kwargs.wsync` in verl's config), with
    verl's `bucket_size` (update_weights_bucket_megabytes, in bytes)."""
    bucket_size: int
    store_host: Optional[str] = None   # the trainer's address the rollout workers reach; None: ray's node IP
    store_port: int = 0                # 0: any free port (the rollout workers are told which)
    group_name: str = "verl"
    transport: Optional[str] = None    # None: wsync's default (ucx on one host, tcp across hosts without RDMA)
    timeout_ms: int = 60000            # wsync's timeout_ms on both sides, and the wait for members at init
    commit_quorum: Optional[int] = None  # None: every rollout worker of the sync must hold the version
    max_rollout_workers: int = 64      # the group's ranks (wsync num_receivers)
    receive: str = "staged"            # "staged" or "stream"
    secret_file: Optional[str] = None  # else WSYNC_GROUP_SECRET / WSYNC_GROUP_SECRET_FILE
    options: dict = field(default_factory=dict)           # more wsync group options
    receiver_options: dict = field(default_factory=dict)  # more wsync receiver options

    @classmethod
    def from_kwargs(cls, bucket_size: int, kwargs: dict) -> "Settings":
        known = set(cls.__dataclass_fields__) - {"bucket_size"}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError("wsync: unknown engine argument(s) %s for checkpoint_engine.engine_kwargs.wsync "
                             "(accepted: %s)" % (", ".join(unknown), ", ".join(sorted(known))))
        s = cls(bucket_size=int(bucket_size), **kwargs)
        s.timeout_ms, s.max_rollout_workers = int(s.timeout_ms), int(s.max_rollout_workers)
        s.store_port = int(s.store_port)
        s.commit_quorum = None if s.commit_quorum is None else int(s.commit_quorum)
        s.options, s.receiver_options = dict(s.options or {}), dict(s.receiver_options or {})
        if s.receive not in RECEIVE_MODES:
            raise ValueError("wsync: engine argument receive=%r: must be one of %s"
                             % (s.receive, ", ".join(RECEIVE_MODES)))
        for name in ("timeout_ms", "max_rollout_workers", "bucket_size"):
            if getattr(s, name) <= 0:
                raise ValueError("wsync: engine argument %s=%r must be a positive integer" % (name, getattr(s, name)))
        for key in sorted(set(s.options) & set(_OWN_OPTIONS)):
            raise ValueError("wsync: engine argument options.%s: the backend sets this group option itself%s"
                             % (key, "; use the engine argument " + _OWN_OPTIONS[key] if _OWN_OPTIONS[key] else ""))
        if s.commit_quorum is not None and not 1 <= s.commit_quorum <= s.max_rollout_workers:
            raise ValueError("wsync: engine argument commit_quorum=%r must be 1..max_rollout_workers (%d)"
                             % (s.commit_quorum, s.max_rollout_workers))
        if s.store_host is None:
            s.store_host = _node_ip()
        return s

    def check_secret(self) -> None:
        """Every member needs the group secret: refuse to start without one, before a group or a
        receiver would (the trainer would generate one that no rollout worker knows)."""
        named = (self.secret_file, os.environ.get("WSYNC_GROUP_SECRET"), os.environ.get("WSYNC_GROUP_SECRET_FILE"),
                 self.options.get("secret"), self.options.get("secret_file"),
                 self.receiver_options.get("secret"), self.receiver_options.get("secret_file"))
        if not any(named):
            raise ValueError("wsync: no group secret in this worker: set WSYNC_GROUP_SECRET (or "
                             "WSYNC_GROUP_SECRET_FILE, a 0600 file) in the environment of every trainer and rollout "
                             "worker (ray: runtime_env env_vars), or the engine argument secret_file; the trainer and "
                             "the rollout workers must share it (docs/SECURITY.md)")


@CheckpointEngineRegistry.register(BACKEND)
class WsyncCheckpointEngine(CheckpointEngine):
    """verl's checkpoint engine `wsync`. Made on every trainer rank with is_master=(rank == 0) and on
    every rollout worker with is_master False; the role comes with init_process_group."""

    def __init__(self, bucket_size: int, is_master: bool = False, **engine_kwargs: Any) -> None:
        self.settings = Settings.from_kwargs(bucket_size, engine_kwargs)
        self.settings.check_secret()
        self.is_master = bool(is_master)
        self.me = topology.identity()
        self.role: Optional[str] = None  # "trainer" or "rollout", from init_process_group
        self.index: Optional[int] = None
        self.publisher = Publisher(self.settings, self.me) if self.is_master else None
        self.subscriber = None if self.is_master else Subscriber(self.settings, self.me)

    def prepare(self) -> dict:
        if self.publisher is not None:
            return dict(self.me, **self.publisher.prepare())
        return dict(self.me, **self.subscriber.prepare())

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list) -> tuple:
        return topology.build(actor_wg_world_size, rollout_world_size, metadata)

    def init_process_group(self, role: str, index: int, store: str, rollouts: Optional[list] = None,
                           rank: Optional[int] = None, join: bool = True) -> None:
        self.role, self.index = role, index
        if role == "trainer":
            if (index == 0) != self.is_master:
                raise SyncError("wsync: %s: build_topology made it trainer rank %d, but it was made with is_master=%s"
                                % (topology.describe_trainer(index, self.me), index, self.is_master))
            if self.publisher is not None:
                self.publisher.expect(store, rollouts or [])
            return
        if self.subscriber is None:
            raise SyncError("wsync: trainer rank 0's engine (is_master=True) was given the rollout role")
        self.subscriber.join(index, store, int(rank), bool(join))

    def finalize(self) -> None:
        """Nothing to free: the group and the receivers stay for the next sync."""

    async def send_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                           global_steps: Optional[int] = None) -> dict:
        """Rank 0 publishes the weights as one wsync version (global_steps when it is above the last
        committed version, else the next one) and returns verl's sync metrics; the other ranks
        walk the generator (its tensors are gathered collectively) and return {}."""
        if self.role != "trainer":
            raise SyncError("wsync: send_weights on a worker that init_process_group did not make a trainer rank "
                            "(role %r)" % (self.role,))
        if self.publisher is None:
            from verl.workers.rollout.utils import ensure_async_iterator
            async for _ in ensure_async_iterator(weights):
                pass
            return {}
        return await self.publisher.publish(weights, global_steps)

    async def receive_weights(self, global_steps: Optional[int] = None
                              ) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        """The version trainer rank 0 publishes: every (name, tensor) once it committed (receive
        "staged"), or each as its bucket arrives (receive "stream")."""
        if self.role != "rollout" or self.subscriber is None:
            raise SyncError("wsync: receive_weights on a worker that init_process_group did not make a rollout worker "
                            "(role %r)" % (self.role,))
        async for item in self.subscriber.receive(global_steps):
            yield item

    def close(self) -> None:
        """Leave: close the group (trainer rank 0) or the receiver. verl never calls this; a rollout
        worker that stops taking part while its process lives on must (see docs/VERL.md)."""
        if self.publisher is not None:
            self.publisher.close()
        if self.subscriber is not None:
            self.subscriber.close()
