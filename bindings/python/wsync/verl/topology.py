"""Who takes part in one sync, decided on verl's driver from what every worker's prepare() said.

verl gathers prepare()'s dicts (trainer ranks first, then rollout workers) and hands them to the
backend's build_topology, whose two dicts of lists become each worker's init_process_group
keyword arguments. Here that is where every rollout worker gets its wsync rank: one that is a
member of the trainer's group keeps its rank; a new one (or one whose receiver is gone) gets a
free one and joins. The trainer's rank 0 then knows every rollout worker's rank, host and pid, so
its errors name them. Pure functions: no sockets, no wsync calls.
"""
import os
import socket
from typing import Any, Iterable, Optional


class SyncError(RuntimeError):
    """A sync (or its preparation) that did not complete. The message names the worker it
    happened on and the workers at fault (role, wsync rank, host, pid); `workers` lists the
    latter as dicts ({"index", "rank", "host", "pid"}, what is known of each)."""

    def __init__(self, message: str, workers: Iterable[dict] = ()):
        super().__init__(message)
        self.workers = list(workers)


def identity() -> dict:
    """This process, as prepare() reports it."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def describe_rollout(info: Optional[dict], rank: Optional[int] = None) -> str:
    """'rollout worker 2 (wsync rank 3, host h, pid 123)'; what is not known is left out."""
    info = info or {}
    rank = info.get("rank", rank)
    what = "rollout worker %s" % info["index"] if info.get("index") is not None else "a rollout worker"
    parts = ["wsync rank %d" % rank] if rank else []
    if info.get("host"):
        parts.append("host %s" % info["host"])
    if info.get("pid"):
        parts.append("pid %d" % info["pid"])
    return "%s (%s)" % (what, ", ".join(parts)) if parts else what


def describe_trainer(index: int, me: dict) -> str:
    return "trainer rank %d (host %s, pid %d)" % (index, me["host"], me["pid"])


def assign_ranks(rollouts: list, members: Iterable[int], capacity: int) -> list:
    """The wsync rank of every rollout worker and whether it must join, as [(rank, join)].

    rollouts: each rollout worker's prepare() dict ("rank": its receiver's rank or 0, "joined":
    whether that receiver is alive). members: the ranks in the trainer's group now. A worker whose
    receiver is alive and a member keeps its rank; one that had a rank nobody holds now asks for it
    back; any other gets the lowest rank that is neither a member nor kept by another worker."""
    members = set(members)
    taken = set(members)
    out: list = [None] * len(rollouts)
    for i, r in enumerate(rollouts):  # members first: their ranks are theirs
        rank = int(r.get("rank") or 0)
        if rank and r.get("joined") and rank in members:
            out[i] = (rank, False)
    for i, r in enumerate(rollouts):  # then old ranks asked back
        rank = int(r.get("rank") or 0)
        if out[i] is None and rank and rank not in taken and rank <= capacity:
            out[i] = (rank, True)
            taken.add(rank)
    free = (r for r in range(1, capacity + 1) if r not in taken)
    for i in range(len(rollouts)):
        if out[i] is None:
            rank = next(free, None)
            if rank is None:
                raise SyncError("wsync: %d rollout workers do not fit in the trainer's group of %d ranks (%d of them "
                                "are members): raise the engine argument max_rollout_workers"
                                % (len(rollouts), capacity, len(members)))
            out[i] = (rank, True)
    return out


def build(actor_world_size: int, rollout_world_size: int, metadata: list) -> tuple:
    """verl's build_topology: (trainer kwargs, rollout kwargs), dicts of lists of the worker
    groups' sizes. metadata: prepare()'s dicts, trainer ranks first."""
    if len(metadata) != actor_world_size + rollout_world_size:
        raise SyncError("wsync: build_topology got %d prepare() results for %d trainer ranks and %d rollout workers"
                        % (len(metadata), actor_world_size, rollout_world_size))
    trainers, rollouts = metadata[:actor_world_size], metadata[actor_world_size:]
    master: Any = trainers[0] if trainers else None
    if not master or not master.get("store"):
        raise SyncError("wsync: trainer rank 0 did not host the group: its checkpoint engine must be made with "
                        "is_master=True (verl does so on torch.distributed rank 0)")
    for i, m in enumerate(trainers[1:], 1):
        if m.get("store"):
            raise SyncError("wsync: trainer rank %d was made with is_master=True too (only rank 0 may be)" % i)
    for i, m in enumerate(rollouts):
        if m.get("store"):
            raise SyncError("wsync: rollout worker %d was made with is_master=True" % i)
    ranks = assign_ranks(rollouts, master.get("members", ()), int(master["capacity"]))
    infos = [{"index": i, "rank": rank, "host": m.get("host"), "pid": m.get("pid"), "join": join}
             for i, ((rank, join), m) in enumerate(zip(ranks, rollouts))]
    store = master["store"]
    trainer_kwargs = {"role": ["trainer"] * actor_world_size, "index": list(range(actor_world_size)),
                      "store": [store] * actor_world_size, "rollouts": [infos] * actor_world_size}
    rollout_kwargs = {"role": ["rollout"] * rollout_world_size, "index": list(range(rollout_world_size)),
                      "store": [store] * rollout_world_size, "rank": [i["rank"] for i in infos],
                      "join": [i["join"] for i in infos]}
    return trainer_kwargs, rollout_kwargs
