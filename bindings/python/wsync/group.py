"""The sender half: a trainer's Group."""
import ctypes
import threading
import weakref
from dataclasses import dataclass

from . import _ffi
from ._ffi import lib
from ._options import Closing, Options, text, timeout, version as _version
from ._tensors import Declaration, Descriptors
from .errors import InvalidStateError, TimeoutError, check, error_for


@dataclass(frozen=True)
class GroupStats:
    num_receivers: int
    committed_version: int
    updates: int
    batches: int
    buckets: int
    tensors: int
    bytes: int
    staging_bytes: int
    send_seconds: float
    device_staging_bytes: int
    plans_computed: int  # many senders: ownership plans computed (a repeated plan is reused)
    members: int = 0  # receivers in the group now (membership=elastic removes those that fail)
    members_left: int = 0  # receivers removed since init


@dataclass(frozen=True)
class MemberEvent:
    """A receiver that left or joined the group (option membership=elastic; Group.member_events())."""
    kind: str      # "left", or "joined" (between updates; status "WSYNC_OK")
    rank: int
    status: str    # what removed it: "WSYNC_ERR_PEER_FAILED", "WSYNC_ERR_TIMEOUT", a refusal's status
    update: int    # the update it left in (1 for the first), or the first one it takes part in
    reason: str    # what happened, naming the receiver


class SendHandle:
    """One batch started with Group.send_async. Its tensors stay borrowed (and referenced by this
    handle and the group) until wait() returns without raising TimeoutError, or the group closes:
    do not overwrite them before."""

    def __init__(self, group, ticket, descriptors):
        self._group = weakref.ref(group)  # a dropped group closes at once, not at the next GC pass
        self.ticket = ticket
        self._descriptors = descriptors
        self._done = False

    def wait(self, timeout_ms=None):
        """Wait until wsync no longer reads the batch's tensors (packed into staging or sent on
        their first hop; Group.finalize waits for delivery to every receiver). TimeoutError: not
        yet (still borrowed, wait again); any other error: the batch (or an earlier one) failed
        and the group is broken."""
        if self._done:
            return
        g = self._group()
        if g is None:
            raise InvalidStateError("the group of batch %d is closed" % self.ticket)
        st = lib.wsync_group_send_wait(g._handle_or_raise(), self.ticket, timeout(timeout_ms))
        if st == TimeoutError.status:
            check(st)
        err = error_for(st, lib.wsync_last_error().decode("utf-8", "replace")) if st != 0 else None
        self._release()  # read the error first: releasing the tensors may run finalizers
        if err is not None:
            raise err

    def done(self):
        """True once released (never blocks; raises if the batch failed)."""
        try:
            self.wait(0)
        except TimeoutError:
            return False
        return True

    def _release(self):
        self._done = True
        self._descriptors = None
        g = self._group()
        if g is not None:
            g._inflight.pop(self.ticket, None)


class Group(Closing):
    """A wsync group: this process is the sender (rank 0) and `num_receivers` receivers join.

    with wsync.Group(num_receivers=2, store_addr="0.0.0.0:29500", group_name="g") as g:
        g.send(model.named_parameters())
        g.finalize(version=1)

    Calls come from one thread at a time, except abort(), which any thread may call while another
    call is in progress. The GIL is released while wsync works or waits."""

    def __init__(self, num_receivers=0, *, group_name=None, store_addr=None, transport=None, adapter=None,
                 options=None, timeout_ms=None):
        opts = Options(options)
        cfg = _ffi.new(_ffi.GroupConfig, num_receivers=num_receivers, group_name=text(group_name),
                       store_addr=text(store_addr), transport=text(transport), adapter=text(adapter),
                       num_options=opts.count, timeout_ms=timeout(timeout_ms))
        if opts.count:
            cfg.options = opts.array
        handle = ctypes.c_void_p()
        self._handle = None
        self._lock = threading.Lock()  # abort() against close()
        self._inflight = {}
        self._starting = []
        self._stream = None
        check(lib.wsync_group_init(ctypes.byref(cfg), ctypes.byref(handle)))
        self._handle = handle

    def _handle_or_raise(self):
        if self._handle is None:
            raise InvalidStateError("the group is closed")
        return self._handle

    @property
    def store_addr(self):
        """"host:port" of the group's store (the address receivers pass)."""
        return lib.wsync_group_store_addr(self._handle_or_raise()).decode()

    def declare(self, tensors):
        """Declare the whole next update before its first send: every tensor it will send, whole
        (a dict or (name, x) pairs; x a tensor (any device, "meta" too), a numpy array, a Slice or
        DTensor (its full tensor), or a (dtype name, shape) pair; no bytes are read). Engines
        that check updates (vLLM with the wsync backend) check it against the served model when
        the update starts, before anything is paused or loaded: a bad tensor then fails the first
        send naming it, with every engine untouched and serving. The update's sends may then only
        send declared tensors, and (one sender) finalize refuses while declared tensors are unsent.
        Returns at once (wsync_group_declare_update)."""
        d = Declaration(tensors)
        arr, n = d.array, d.count
        check(lib.wsync_group_declare_update(self._handle_or_raise(), arr, n))

    def send(self, tensors, timeout_ms=None):
        """Send one batch of the current update and return once every receiver has it. `tensors`:
        a dict {name: tensor}, a module's named_parameters(), or (name, tensor) pairs."""
        d = Descriptors(tensors)
        arr, n = d.tensors()
        check(lib.wsync_group_send_batch(self._handle_or_raise(), arr, n, timeout(timeout_ms)))

    def send_async(self, tensors, timeout_ms=None):
        """Start sending one batch and return a SendHandle at once, so the next batch can be
        produced while this one moves. At most `staging_buckets` batches are in flight; this
        waits (up to timeout_ms) for room."""
        d = Descriptors(tensors)
        arr, n = d.tensors()
        ticket = ctypes.c_uint64()
        # Referenced before the call: an exception (Ctrl-C) between the C call and the assignment
        # must not leave wsync reading memory Python freed.
        self._starting.append(d)
        try:
            check(lib.wsync_group_send_start(self._handle_or_raise(), arr, n, timeout(timeout_ms),
                                             ctypes.byref(ticket)))
            h = SendHandle(self, ticket.value, d)
            self._inflight[ticket.value] = h
        finally:
            self._starting.remove(d)
        return h

    def set_cuda_stream(self, stream):
        """The CUDA stream producing the tensors of the next sends: a torch.cuda.Stream, an
        integer cudaStream_t, or None for the legacy default stream."""
        ptr = getattr(stream, "cuda_stream", stream)
        check(lib.wsync_group_set_cuda_stream(self._handle_or_raise(), ctypes.c_void_p(ptr or None)))
        self._stream = stream  # wsync records events on it until the next call: keep it alive

    def finalize(self, version, timeout_ms=None):
        """Close the update as weight version `version` (greater than the last): returns once every
        receiver committed it."""
        check(lib.wsync_group_finalize(self._handle_or_raise(), _version(version), timeout(timeout_ms)))
        for h in list(self._inflight.values()):  # all delivered once a finalize succeeded
            h._release()

    def abort(self):
        """Make any call in progress return AbortedError soon, and every later send/finalize.
        Safe from any thread."""
        with self._lock:
            if self._handle is not None:
                lib.wsync_group_abort(self._handle)

    def stats(self):
        s = _ffi.new(_ffi.GroupStats)
        check(lib.wsync_group_get_stats(self._handle_or_raise(), ctypes.byref(s)))
        return GroupStats(**{f: getattr(s, f) for f, _ in _ffi.GroupStats._fields_ if f != "struct_size"})

    def members(self):
        """The ranks of the receivers in the group now, ascending (option membership=elastic
        removes those that fail)."""
        h = self._handle_or_raise()
        count = ctypes.c_uint64(0)
        check(lib.wsync_group_members(h, None, 0, ctypes.byref(count)))
        ranks = (ctypes.c_uint32 * max(1, count.value))()
        check(lib.wsync_group_members(h, ranks, count.value, ctypes.byref(count)))
        return [int(ranks[i]) for i in range(min(count.value, len(ranks)))]

    def member_events(self):
        """Every member event not taken yet, oldest first (a list of MemberEvent; never blocks)."""
        h = self._handle_or_raise()
        out = []
        while True:
            ev = _ffi.new(_ffi.MemberEvent)
            st = lib.wsync_group_next_member_event(h, ctypes.byref(ev))
            if st == 2:  # WSYNC_ERR_NOT_FOUND: none new
                return out
            check(st)
            kind = {1: "joined", 2: "left"}.get(ev.kind, str(ev.kind))
            out.append(MemberEvent(kind, int(ev.rank), lib.wsync_status_name(ev.status).decode(), int(ev.update),
                                   (ev.reason or b"").decode("utf-8", "replace")))

    def close(self):
        """Destroy the group: receivers are told it closed, in-flight batches are abandoned and
        their tensors released. Idempotent."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            lib.wsync_group_destroy(handle)
            for h in list(self._inflight.values()):
                h._release()
