"""Trainer rank 0: the wsync group every rollout worker joins, and one sync's publish.

The group is made once, at the first prepare(), and lives across syncs: membership=elastic (a
rollout worker that dies, hangs past timeout_ms or refuses a bucket is removed; one may join
between syncs), init_receivers=1 (its init returns once the first rollout worker joined; the others
join as members between updates, which init_process_group waits for). It is made again only after
a failure on the trainer's own side (an abort, a broken transport, the generator raising): then
the store's address changes and every rollout worker joins the new group at the next sync.
"""
import asyncio
import collections
import logging
import os
import shutil
import tempfile
import threading
import time
from typing import Optional

import torch
from verl.workers.rollout.utils import ensure_async_iterator

import wsync

from .topology import SyncError, describe_rollout, describe_trainer

logger = logging.getLogger("wsync.verl")


class Publisher:
    def __init__(self, settings, me: dict) -> None:
        self.s = settings
        self.me = me
        self.group: Optional[wsync.Group] = None
        self.store: Optional[str] = None
        self.broken = False
        self.committed = 0
        self.known: dict = {}   # wsync rank -> the rollout worker's info, as build_topology gave it
        self.left: dict = {}    # wsync rank -> why the group removed it (member events)
        self._starting: Optional[threading.Thread] = None  # the group's init, until init_process_group
        self._started: dict = {}  # what that thread made: "group", or "error"

    def who(self) -> str:
        return describe_trainer(0, self.me)

    # --- prepare / init_process_group ---------------------------------------------------------

    def prepare(self) -> dict:
        """The store's address, the group's members now and its capacity (for build_topology)."""
        if self.group is not None and self.broken:
            logger.warning("wsync: %s makes a new group: the last one broke on the trainer's side", self.who())
            self.close()
        if self.group is None and self._starting is None:
            self._start()
        members = self.group.members() if self.group is not None else []
        return {"store": self.store, "members": members, "capacity": self.s.max_rollout_workers}

    def _options(self, store_file: str) -> dict:
        opts = {"store_addr_file": store_file, "membership": "elastic", "init_receivers": "1",
                "timeout_ms": str(self.s.timeout_ms), "bucket_bytes": str(self.s.bucket_size)}
        if self.s.commit_quorum is not None:
            opts["commit_quorum"] = str(self.s.commit_quorum)
        if self.s.secret_file:
            opts["secret_file"] = self.s.secret_file
        opts.update({k: str(v) for k, v in self.s.options.items()})
        return opts

    def _start(self) -> None:
        """Start the group on a thread (its init waits for the first rollout worker, which joins
        in init_process_group, after this returns) and return once its store listens."""
        folder = tempfile.mkdtemp(prefix="wsync-verl-")
        store_file = os.path.join(folder, "store")
        host = self.s.store_host
        addr = "[%s]:%d" % (host, self.s.store_port) if ":" in host else "%s:%d" % (host, self.s.store_port)
        started: dict = {}

        def run() -> None:
            try:
                started["group"] = wsync.Group(self.s.max_rollout_workers, group_name=self.s.group_name,
                                               store_addr=addr, transport=self.s.transport,
                                               options=self._options(store_file), timeout_ms=self.s.timeout_ms)
            except BaseException as e:  # handed to init_process_group
                started["error"] = e

        thread = threading.Thread(target=run, name="wsync-verl-group", daemon=True)
        thread.start()
        try:
            while not os.path.exists(store_file):
                if not thread.is_alive():
                    raise SyncError("wsync: %s could not start its group at %s: %s"
                                    % (self.who(), addr, started.get("error"))) from started.get("error")
                time.sleep(0.005)
            with open(store_file) as f:
                self.store = f.read().strip()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self._starting, self._started, self.broken, self.left = thread, started, False, {}
        logger.info("wsync: %s hosts group '%s' at %s", self.who(), self.s.group_name, self.store)

    def _await_group(self) -> wsync.Group:
        if self._starting is not None:
            self._starting.join(self.s.timeout_ms / 1000.0 + 10.0)
            thread, started, self._starting, self._started = self._starting, self._started, None, {}
            if thread.is_alive() or "group" not in started:
                err, store, self.store = started.get("error"), self.store, None
                raise SyncError("wsync: %s: no rollout worker joined its group at %s: %s"
                                % (self.who(), store, err or "its init did not return")) from err
            self.group = started["group"]
        if self.group is None:
            raise SyncError("wsync: %s: init_process_group before prepare()" % self.who())
        return self.group

    def expect(self, store: str, rollouts: list) -> None:
        """Return once the group's members are exactly this sync's rollout workers; else, after
        timeout_ms, raise naming those missing and those that should not be there."""
        g = self._await_group()
        if store != self.store:
            raise SyncError("wsync: %s hosts its group at %s, but build_topology gave the rollout workers %s"
                            % (self.who(), self.store, store))
        expected = {int(r["rank"]): r for r in rollouts}
        self.known.update(expected)
        deadline = time.monotonic() + self.s.timeout_ms / 1000.0
        while True:
            members = set(g.members())
            self._note_events()
            if members == set(expected):
                return
            if time.monotonic() > deadline:
                raise self._membership_error(members, expected)
            time.sleep(0.01)

    def _membership_error(self, members: set, expected: dict) -> SyncError:
        missing = sorted(set(expected) - members)
        extra = sorted(members - set(expected))
        words, workers = [], []
        for r in missing:
            why = self.left.get(r)
            words.append("%s is not a member%s" % (describe_rollout(expected[r]),
                                                    " (it left: %s)" % why if why else ": it did not join"))
            workers.append(expected[r])
        for r in extra:
            info = dict(self.known.get(r, {}), index=None)
            words.append("%s is a member but not one of verl's rollout workers for this sync: wsync cannot drop a "
                         "live member from the trainer's side; stop that worker or close its engine"
                         % describe_rollout(info, r))
            workers.append(dict(self.known.get(r, {}), rank=r))
        return SyncError("wsync: %s: the group's members do not match this sync's %d rollout workers after %d ms: %s"
                         % (self.who(), len(expected), self.s.timeout_ms, "; ".join(words)), workers)

    def _note_events(self) -> list:
        """Take the group's member events: remember why each rank left; log each once."""
        events = self.group.member_events() if self.group is not None else []
        for e in events:
            if e.kind == "left":
                self.left[e.rank] = e.reason
                logger.warning("wsync: %s left the group: %s", describe_rollout(self.known.get(e.rank), e.rank),
                               e.reason)
            else:
                self.left.pop(e.rank, None)
                logger.info("wsync: %s joined the group", describe_rollout(self.known.get(e.rank), e.rank))
        return events

    # --- send_weights -----------------------------------------------------------------------

    async def publish(self, weights, global_steps: Optional[int]) -> dict:
        """Send every tensor of the generator and commit them as one version. The generator is
        walked to its end even after a failure: the other trainer ranks gather with this one."""
        try:
            g = self._await_group()
            before = g.stats()
        except Exception:
            async for _ in ensure_async_iterator(weights):
                pass  # nothing can be sent, but the other ranks' gathers need this one
            raise
        version = max(self.committed + 1, int(global_steps or 0))
        t0 = time.monotonic()
        failure: Optional[Exception] = None
        failed_in = "send"
        batch, nbytes, tensors = [], 0, 0
        inflight: collections.deque = collections.deque()
        stream_set = False
        try:
            async for name, tensor in ensure_async_iterator(weights):
                if failure is not None:
                    continue  # walk on: the other ranks' gathers need this one
                try:
                    tensor = tensor.detach()
                    if not tensor.is_contiguous():
                        tensor = tensor.contiguous()
                    if tensor.is_cuda and not stream_set:  # wsync orders its reads after the producing stream
                        g.set_cuda_stream(torch.cuda.current_stream(tensor.device))
                        stream_set = True
                    batch.append((name, tensor))
                    nbytes += tensor.nbytes
                    tensors += 1
                    if nbytes >= self.s.bucket_size:
                        await self._start_batch(g, batch, inflight)
                        batch, nbytes = [], 0
                except Exception as e:
                    failure = e
                    g.abort()
            if failure is None:
                try:
                    if batch:
                        await self._start_batch(g, batch, inflight)
                    while inflight:
                        await asyncio.to_thread(inflight.popleft().wait)
                    failed_in = "commit"
                    await asyncio.to_thread(g.finalize, version)
                except Exception as e:
                    failure = e
        except BaseException:  # the generator raised, or the task was cancelled: the update cannot end
            self.broken = True
            g.abort()
            raise
        left = [e for e in self._note_events() if e.kind == "left"]
        if failure is not None:
            raise self._sync_error(failure, failed_in, left, version, global_steps)
        self.committed = version
        after = g.stats()
        for e in left:  # committed by commit_quorum without them
            logger.warning("wsync: version %d committed without %s (commit_quorum %s)", version,
                           describe_rollout(self.known.get(e.rank), e.rank), self.s.commit_quorum)
        seconds = time.monotonic() - t0
        logger.info("wsync: %s committed version %d (step %s): %d tensors, %d bytes, %.3f s, %d rollout workers",
                    self.who(), version, global_steps, tensors, after.bytes - before.bytes, seconds, after.members)
        return {"wsync/version": version, "wsync/seconds": seconds, "wsync/bytes": after.bytes - before.bytes,
                "wsync/tensors": tensors, "wsync/rollout_workers": after.members,
                "wsync/rollout_workers_left": len(left)}

    async def _start_batch(self, g: wsync.Group, batch: list, inflight: collections.deque) -> None:
        """Start one batch; keep at most two in flight (the tensors of older ones are released)."""
        inflight.append(await asyncio.to_thread(g.send_async, batch))
        while len(inflight) > 1:
            await asyncio.to_thread(inflight.popleft().wait)

    def _sync_error(self, e: BaseException, failed_in: str, left: list, version: int,
                    steps: Optional[int]) -> SyncError:
        """The sync's error, naming who failed. Rollout workers removed during the sync (elastic)
        fail only the commit and leave the group usable for the next sync; anything else breaks it
        (a new group at the next prepare)."""
        if isinstance(e, wsync.PeerFailedError) and failed_in == "commit" and left:
            # (below the quorum after END_UPDATE the version did commit on those left: never reuse it)
            self.committed = max(self.committed, self.group.stats().committed_version)
            words = ["%s left the group during the sync: %s"
                     % (describe_rollout(self.known.get(x.rank), x.rank), x.reason) for x in left]
            err = SyncError("wsync: %s: the sync of step %s (version %d) failed: %s; the group goes on without "
                            "the ones that left [%s]" % (self.who(), steps, version, "; ".join(words), e),
                            [dict(self.known.get(x.rank, {}), rank=x.rank) for x in left])
        else:
            self.broken = True
            if self.group is not None:
                self.group.abort()
            err = SyncError("wsync: %s failed to publish step %s (version %d): %s" % (self.who(), steps, version, e))
        err.__cause__ = e
        return err

    def close(self) -> None:
        if self._starting is not None:
            try:
                self._await_group()
            except SyncError:
                pass
        if self.group is not None:
            self.group.close()
        self.group, self.store, self.broken = None, None, False

