"""The receiver half: one engine worker's Receiver, its events and the views they hand out."""
import ctypes
import enum
from dataclasses import dataclass, field

from . import _ffi
from ._ffi import lib
from ._options import Closing, Options, text, timeout, version as _version
from ._tensors import CPU, DTYPE_NAMES, Descriptors, named_items
from .errors import InvalidStateError, UnsupportedError, check


class EventKind(enum.IntEnum):
    NONE = 0
    BUCKET = 1   # tensors arrived: Event.tensors
    COMMIT = 2   # the sender finalized Event.version: apply, then Receiver.commit(version)
    CLOSED = 3   # the sender destroyed the group: close the receiver
    ABORTED = 4  # the sender aborted the current update: it never commits (in place, see Receiver.state())


class ReceiveMode(enum.IntEnum):
    """How registered buffers get their bytes: the receiver option receive_mode."""
    IN_PLACE = 1  # written as the buckets arrive (the default)
    STAGED = 2    # staged in wsync's memory, copied in by Receiver.commit() only


class Buffers(enum.IntEnum):
    """What the registered buffers hold (ReceiverState.buffers)."""
    CLEAN = 1  # no update wrote into them since the last commit
    MIXED = 2  # in place: an update wrote into the touched ones since the last commit; refuse to serve them


@dataclass
class ReceiverState:
    """What the updates did to the registered buffers (Receiver.state()).

    touched: in place, the registered tensors written since the last commit; staged, those staged
    for the update in progress. late_writes: the transport gave up on a receive into registered
    buffers and may still write into them until close() (in place only). num_senders: the senders
    this receiver joined (many senders: each batch's tensors come from all of them, in any order);
    planned: the senders wait for this receiver's needs (register(), also with nothing, says them).
    rank: this receiver's rank (the one asked for, or the one an elastic group's sender assigned to
    Receiver(rank=0)); rank_assigned: the sender assigned it."""
    receive_mode: ReceiveMode
    committed_version: int
    pending_version: int
    buffers: Buffers
    late_writes: bool
    touched: list
    staged_bytes: int
    num_senders: int = 1
    planned: bool = False
    rank: int = 0
    rank_assigned: bool = False


class TensorView:
    """One tensor of a BUCKET event. `placed`: its bytes were written into the buffer registered
    under its name (numpy()/torch() then return views of that buffer, which you own); `staged`
    (receive_mode "staged"): they will be, at Receiver.commit(), and the buffer holds the previous
    bytes until then. Otherwise
    the bytes live in wsync's memory and this view is valid only until the next
    Receiver.next() or close(): numpy(), torch() and copy() then raise InvalidStateError, and the
    arrays they returned earlier must not be used any more (copy() gives an array you own)."""

    def __init__(self, rx, generation, desc, placed, registered):
        self._rx = rx
        self._generation = generation
        self.name = desc.name.decode("utf-8")
        self.dtype = DTYPE_NAMES.get(desc.dtype, "invalid")
        self.shape = tuple(desc.shape[:desc.ndim])
        self.nbytes = desc.nbytes
        self.device = "cpu" if desc.device_type in (0, CPU) else "cuda:%d" % desc.device_index
        self.placed = bool(placed)
        self.staged = placed == 2  # WSYNC_PLACED_STAGED
        self._data = desc.data
        self._registered = registered

    @property
    def valid(self):
        return self.placed or (self._rx._generation == self._generation and self._rx._handle is not None)

    def _check(self):
        if not self.valid:
            raise InvalidStateError("the view of tensor '%s' expired: it was valid until the next "
                                    "Receiver.next() (use copy() before it)" % self.name)

    def numpy(self):
        """A numpy view (bfloat16 and float8 come as uint16/uint8: numpy has no such dtype).
        Host memory only: a tensor in CUDA memory raises UnsupportedError (use torch())."""
        import numpy as np
        self._check()
        if self.device != "cpu" and not (self.placed and _is_numpy(self._registered)):
            raise UnsupportedError("tensor '%s' is in device memory (%s): numpy() views host memory only; use "
                                   "torch()" % (self.name, self.device))
        if self.placed and self._registered is not None and _is_numpy(self._registered):
            return self._registered
        np_dtype = {"bool": np.bool_, "bfloat16": np.uint16, "float8_e4m3fn": np.uint8,
                    "float8_e5m2": np.uint8}.get(self.dtype) or np.dtype(self.dtype)
        if self.nbytes == 0:
            return np.empty(self.shape, dtype=np_dtype)
        buf = (ctypes.c_uint8 * self.nbytes).from_address(self._data)
        return np.frombuffer(buf, dtype=np_dtype).reshape(self.shape)

    def torch(self):
        """A torch view (for a placed tensor: the registered tensor itself)."""
        import torch
        self._check()
        if self.placed and self._registered is not None and type(self._registered).__module__.startswith("torch"):
            return self._registered
        if self.device != "cpu":
            return self._cuda_view(torch)
        a = self.numpy()
        t = torch.from_numpy(a) if a.size else torch.empty(self.shape, dtype=getattr(torch, self.dtype))
        want = getattr(torch, self.dtype)
        return t.view(want) if t.dtype != want else t

    def _cuda_view(self, torch):
        """A torch tensor over wsync's CUDA memory, through __cuda_array_interface__ (no copy)."""
        want = getattr(torch, self.dtype)
        if self.nbytes == 0:
            return torch.empty(self.shape, dtype=want, device=self.device)
        typestr = _CUDA_TYPESTR[self.dtype]
        t = torch.as_tensor(_CudaMemory(self._data, self.shape, typestr), device=self.device)
        self._rx._cuda_views = t.device  # Receiver.next() waits for work queued on it
        return t.view(want) if t.dtype != want else t

    def copy(self):
        """An owned copy: a torch tensor if torch is importable, else a numpy array. A copy of
        CUDA memory is complete when this returns."""
        try:
            import torch
        except ImportError:
            return self.numpy().copy()
        c = self.torch().clone()
        if c.is_cuda:
            torch.cuda.current_stream(c.device).synchronize()
        return c

    def __repr__(self):
        return "TensorView(%r, %s, %s, placed=%s)" % (self.name, self.dtype, list(self.shape), self.placed)


def _is_numpy(x):
    return type(x).__module__ == "numpy"


# __cuda_array_interface__ type strings; bfloat16 and float8 travel as same-sized integers.
_CUDA_TYPESTR = {"bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "uint8": "|u1",
                 "float16": "<f2", "bfloat16": "<u2", "float32": "<f4", "float64": "<f8",
                 "float8_e4m3fn": "|u1", "float8_e5m2": "|u1"}


class _CudaMemory:
    """Describes wsync's CUDA memory to torch (the numba __cuda_array_interface__, version 2)."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                                         "strides": None, "version": 2}


@dataclass
class Event:
    kind: EventKind
    version: int = 0
    bucket_index: int = 0
    bytes: int = 0
    tensors: list = field(default_factory=list)


class Receiver(Closing):
    """One engine worker in a wsync group.

    with wsync.Receiver(rank=1, store_addr="10.0.0.1:29500", group_name="g") as rx:
        rx.register(model.named_parameters())   # bytes land in place
        for ev in rx.events():
            if ev.kind == wsync.EventKind.COMMIT:
                rx.commit(ev.version)

    rank: 1..num_receivers, or 0 to have a group with membership=elastic assign the lowest free
    rank (self.rank then says which).

    Receiver options (`options`): timeout_ms, device, receive_mode ("in_place" or "staged"),
    local_address, lane (many senders with relays: receivers that take the same slices, e.g. one
    TP rank of every replica, give the same lane), rejoin ("1": after the trainer is gone, next()
    joins a restarted trainer at the same store, keeping the buffers and the committed version),
    transport.*. Used from one thread at a time."""

    def __init__(self, rank, store_addr, *, group_name=None, transport=None, options=None, timeout_ms=None):
        opts = Options(options)
        cfg = _ffi.new(_ffi.ReceiverConfig, rank=rank, store_addr=text(store_addr), group_name=text(group_name),
                       transport=text(transport), num_options=opts.count, timeout_ms=timeout(timeout_ms))
        if opts.count:
            cfg.options = opts.array
        handle = ctypes.c_void_p()
        self._handle = None
        self._generation = 0
        self._registered = {}
        self._cuda_views = None  # the device of CUDA views handed out since the last next()
        self.rank = rank
        check(lib.wsync_receiver_init(ctypes.byref(cfg), ctypes.byref(handle)))
        self._handle = handle
        self._event = _ffi.new(_ffi.ReceiverEvent)
        if rank == 0:  # (an elastic group's sender assigned one)
            self.rank = self.state().rank

    def _handle_or_raise(self):
        if self._handle is None:
            raise InvalidStateError("the receiver is closed")
        return self._handle

    def register(self, tensors):
        """Register buffers by name (a dict, a module's named_parameters(), or pairs): a later
        tensor of the same name, dtype and shape is written straight into it. The buffers are
        referenced here until close() or re-registration of the name. When the senders plan
        (state().planned) this also tells them what this receiver needs; register({}) says "every
        tensor whole" before the first next() (an engine whose next() runs only inside an update)."""
        items = named_items(tensors)  # once: named_parameters() is a generator
        d = Descriptors(items, writable=True)
        arr, n = d.tensors()
        before = dict(self._registered)
        self._registered.update(items)  # referenced before the call (an exception must not free them)
        try:
            check(lib.wsync_receiver_register(self._handle_or_raise(), arr, n))
        except BaseException:
            self._registered = before
            raise

    def next(self, timeout_ms=None):
        """Wait for the next event. Views of the previous event expire here. TimeoutError when
        nothing came in time (the receiver stays usable)."""
        h = self._handle_or_raise()
        self._generation += 1
        if self._cuda_views is not None:  # work queued on CUDA views must end before wsync reuses the memory
            import torch
            torch.cuda.synchronize(self._cuda_views)
            self._cuda_views = None
        ev = self._event
        st = lib.wsync_receiver_next(h, ctypes.byref(ev), timeout(timeout_ms))
        check(st)
        out = Event(EventKind(ev.kind), ev.version, ev.bucket_index, ev.bytes)
        if ev.kind == EventKind.BUCKET and ev.num_tensors:
            step = _ffi.array_step(ev.tensors[0], _ffi.Tensor, "the event's tensor descriptors")
            for i in range(ev.num_tensors):
                desc = _ffi.element(ev.tensors, i, step, _ffi.Tensor)
                placed = ev.placed[i] if ev.placed else 0
                name = desc.name.decode("utf-8")
                out.tensors.append(TensorView(self, self._generation, desc, placed,
                                              self._registered.get(name) if placed else None))
        return out

    def events(self, timeout_ms=None):
        """next() until CLOSED (which is yielded last)."""
        while True:
            ev = self.next(timeout_ms)
            yield ev
            if ev.kind == EventKind.CLOSED:
                return

    def commit(self, version):
        """Confirm version `version` (from the last COMMIT event) is applied. With receive_mode
        "staged" this is where the registered buffers get the version: the sender is told, then the
        staged bytes are copied in (if the sender cannot be told, nothing is copied and this raises)."""
        check(lib.wsync_receiver_commit(self._handle_or_raise(), _version(version)))

    def state(self):
        """What the updates did to the registered buffers: a ReceiverState. An engine refuses to
        serve while `buffers` is Buffers.MIXED, until the next commit."""
        h = self._handle_or_raise()
        s = _ffi.new(_ffi.ReceiverState)
        check(lib.wsync_receiver_get_state(h, ctypes.byref(s)))
        touched = []
        for i in range(s.num_touched):
            name = lib.wsync_receiver_touched_name(h, i)
            touched.append(name.decode("utf-8") if name is not None else "")
        return ReceiverState(ReceiveMode(s.receive_mode), s.committed_version, s.pending_version,
                             Buffers(s.buffers), bool(s.late_writes), touched, s.staged_bytes,
                             max(1, s.num_senders), bool(s.planned), s.rank, bool(s.rank_assigned))

    @property
    def committed_version(self):
        return lib.wsync_receiver_committed_version(self._handle_or_raise())

    def close(self):
        """Leave the group. Idempotent; every view of wsync memory expires."""
        handle, self._handle = self._handle, None
        self._generation += 1
        if handle is not None:
            lib.wsync_receiver_destroy(handle)
        self._registered = {}
