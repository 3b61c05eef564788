"""A rollout worker: its wsync receiver (joined once, kept across syncs) and one sync's receive.

The receiver registers nothing: every tensor arrives as a view of wsync's memory, after wsync
checked it (the payload checksum, verify_payload, on by default on host transports) and within
the group's deadlines. receive="staged" copies each tensor, waits for the trainer's COMMIT,
confirms it and only then yields: the rollout gets the whole version or nothing. receive="stream"
yields each view as its bucket arrives, valid until the caller asks for the next tensor (verl's
server adapters copy each at once), and confirms the COMMIT after the last one.
"""
import asyncio
import logging
from typing import AsyncGenerator, Optional

import wsync
from wsync import EventKind

from .topology import SyncError, describe_rollout

logger = logging.getLogger("wsync.verl")


class Subscriber:
    def __init__(self, settings, me: dict) -> None:
        self.s = settings
        self.me = me
        self.rx: Optional[wsync.Receiver] = None
        self.store: Optional[str] = None
        self.rank = 0
        self.index: Optional[int] = None

    def who(self) -> str:
        return describe_rollout(dict(self.me, index=self.index, rank=self.rank))

    # --- prepare / init_process_group ---------------------------------------------------------

    def prepare(self) -> dict:
        """This worker's rank, and whether its receiver is still in the group."""
        return {"rank": self.rank, "joined": self._alive()}

    def _alive(self) -> bool:
        """A receiver between syncs has nothing to take: any event or error (the group closed, this
        receiver was removed, the trainer is gone, a sync left unfinished) means it must join again."""
        if self.rx is None:
            return False
        try:
            ev = self.rx.next(wsync.NO_WAIT)
        except wsync.TimeoutError:
            return True
        except wsync.WsyncError as e:
            logger.info("wsync: %s joins again: %s", self.who(), e)
        else:
            logger.info("wsync: %s joins again: it found a %s event between syncs", self.who(), ev.kind.name)
        self.close()
        return False

    def join(self, index: int, store: str, rank: int, join: bool) -> None:
        """Join the trainer's group as `rank`, unless this receiver is a member there already."""
        self.index = index
        if not join and self.rx is not None and store == self.store:
            return
        self.close()
        opts = {k: str(v) for k, v in self.s.receiver_options.items()}
        if self.s.secret_file:
            opts.setdefault("secret_file", self.s.secret_file)
        self.rank = rank
        try:
            self.rx = wsync.Receiver(rank, store, group_name=self.s.group_name, options=opts,
                                     timeout_ms=self.s.timeout_ms)
        except wsync.WsyncError as e:
            raise SyncError("wsync: %s could not join the trainer's group at %s: %s" % (self.who(), store, e),
                            [dict(self.me, index=index, rank=rank)]) from e
        self.store = store
        logger.info("wsync: %s joined the group at %s", self.who(), store)

    # --- receive_weights --------------------------------------------------------------------

    async def receive(self, steps: Optional[int]) -> AsyncGenerator:
        rx = self.rx
        if rx is None:
            raise SyncError("wsync: %s: receive_weights without a receiver (init_process_group did not join)"
                            % self.who())
        staged = self.s.receive == "staged"
        held: list = []
        ended = False  # the update ended here (committed, or aborted by the trainer): keep the receiver
        waiting = False  # a thread is inside rx.next(): only it may touch the receiver until it returns
        try:
            while True:
                waiting = True
                kind, version, items = await asyncio.to_thread(self._take, rx, staged, steps)
                waiting = False
                if kind == EventKind.BUCKET:
                    if staged:
                        held.extend(items)
                        continue
                    for name, t in items:  # owned copies: verl's adapters may hold them past the next bucket
                        yield name, self._on_device(t)
                elif kind == EventKind.COMMIT:
                    await asyncio.to_thread(self._commit, rx, version, steps)
                    ended = True
                    break
                else:
                    ended = kind == EventKind.ABORTED
                    raise self._ended(kind, steps, staged)
        finally:
            if not ended and not waiting and self.rx is rx:  # the caller stopped (or raised) mid-update:
                self.close()  # leave now, so the trainer removes this worker at once, not after timeout_ms
        logger.info("wsync: %s committed version %d (step %s)", self.who(), version, steps)
        for name, t in held:
            yield name, self._on_device(t)

    def _take(self, rx: wsync.Receiver, staged: bool, steps: Optional[int]) -> tuple:
        """The next event: (kind, version, [(name, tensor)]); staged copies, else views."""
        try:
            ev = rx.next(self.s.timeout_ms)
        except wsync.TimeoutError as e:
            raise self._failed("nothing came from the trainer at %s within %d ms (%s)"
                               % (self.store, self.s.timeout_ms, e), e, steps)
        except wsync.WsyncError as e:
            raise self._failed("the sync failed: %s" % e, e, steps)
        if ev.kind != EventKind.BUCKET:
            return ev.kind, ev.version, []
        # Copies in both modes: a view expires at the next rx.next(), and verl's adapters may keep a
        # tensor longer (SGLang's batches, vLLM's large-tensor IPC path).
        return ev.kind, ev.version, [(v.name, v.copy()) for v in ev.tensors]

    @staticmethod
    def _on_device(t):
        """On this worker's current CUDA device where there is one (verl's vLLM adapter passes large
        tensors by CUDA IPC and cannot take host tensors); as received (host) on a CPU worker."""
        import torch
        if torch.cuda.is_available() and t.device.type == "cpu":
            return t.to(torch.device("cuda", torch.cuda.current_device()))
        return t

    def _commit(self, rx: wsync.Receiver, version: int, steps: Optional[int]) -> None:
        try:
            rx.commit(version)
        except wsync.WsyncError as e:
            raise self._failed("confirming version %d failed: %s" % (version, e), e, steps)

    def _failed(self, what: str, e: BaseException, steps: Optional[int]) -> SyncError:
        """Leave at once (the trainer then removes this worker now, not at its timeout); the next
        sync's prepare() says so and this worker joins again."""
        err = SyncError("wsync: %s, sync of step %s: %s" % (self.who(), steps, what), [dict(self.me, index=self.index,
                                                                                             rank=self.rank)])
        self.close()
        err.__cause__ = e
        return err

    def _ended(self, kind: EventKind, steps: Optional[int], staged: bool) -> SyncError:
        kept = ("nothing of it was yielded" if staged else
                "the tensors yielded before are of a version that did not commit")
        if kind == EventKind.ABORTED:  # this receiver stays a member: the next sync goes on
            return SyncError("wsync: %s: the trainer at %s ended the sync of step %s without committing it (a member "
                             "failed; the trainer's error names it): %s" % (self.who(), self.store, steps, kept))
        self.close()
        return SyncError("wsync: %s: the trainer at %s closed its group during the sync of step %s: %s"
                         % (self.who(), self.store, steps, kept))

    def close(self) -> None:
        rx, self.rx, self.store = self.rx, None, None
        if rx is not None:
            rx.close()
