package wsync

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// ReceiverConfig configures NewReceiver. Zero values mean the library's defaults.
type ReceiverConfig struct {
	Rank      int           // 1..NumReceivers of the group; 0: an elastic group assigns one (State().Rank)
	StoreAddr string        // required: the sender's store, "host:port" (Group.StoreAddr)
	GroupName string        // "" = "wsync"; must equal the sender's
	Transport string        // "" = the one the sender announces; else a plugin name or path
	Options   []Option      // receiver options (timeout_ms, device, receive_mode, transport.*), in this order
	Timeout   time.Duration // how long NewReceiver waits for the store and the sender; <= 0 = 60 s
}

// Receiver is one engine worker's end of a group. Create it with NewReceiver, optionally
// Register parameter Buffers, then loop on Next: apply each EventBucket, Commit each EventCommit's
// version, and Close at EventClosed.
//
// Threading: call the methods of a Receiver from one goroutine at a time (any goroutine).
type Receiver struct {
	rx         *C.wsync_receiver_t
	ev         *C.wsync_receiver_event_t // C memory, reused by every Next
	registered map[string]*Buffer        // borrowed until re-registration of the name or Close
	gen        atomic.Uint64             // counts Next and Close calls: views of older events expire
}

// EventKind says what Receiver.Next returned.
type EventKind int32

// The event kinds of wsync.h.
const (
	EventNone    EventKind = 0
	EventBucket  EventKind = 1 // tensors arrived: see Event.Tensors
	EventCommit  EventKind = 2 // the sender finalized Event.Version: apply, then Commit
	EventClosed  EventKind = 3 // the sender closed the group: Close the receiver
	EventAborted EventKind = 4 // the sender aborted the current update: it never commits (in place, see State)
)

// String returns "bucket", "commit", "closed", "aborted" or "none".
func (k EventKind) String() string {
	switch k {
	case EventNone:
		return "none"
	case EventBucket:
		return "bucket"
	case EventCommit:
		return "commit"
	case EventClosed:
		return "closed"
	case EventAborted:
		return "aborted"
	}
	return "unknown"
}

// Event is what Receiver.Next returned.
type Event struct {
	Kind         EventKind
	Version      uint64           // EventCommit: the version to commit
	BucketIndex  uint64           // EventBucket: index within the update, from 0
	PayloadBytes uint64           // EventBucket: payload bytes of the bucket
	Tensors      []ReceivedTensor // EventBucket: the tensors completed by this bucket
}

// ReceivedTensor is one tensor of an EventBucket. A tensor split across buckets is reported once,
// in the event of its last chunk.
type ReceivedTensor struct {
	Name        string
	Dtype       Dtype
	Shape       []int64
	NumBytes    uint64
	Placed      bool    // for the registered Buffer of this name: written into it, or staged for it
	Staged      bool    // receive_mode staged: the Buffer gets the bytes at Commit (until then Bytes shows the old ones)
	Buffer      *Buffer // for a placed tensor: that registered Buffer
	DevicePtr   uintptr // non-zero when the bytes are in CUDA memory (a GPU transport)
	DeviceIndex int     // the CUDA ordinal of DevicePtr

	data unsafe.Pointer // C memory: a view into wsync, or the registered Buffer
	rx   *Receiver      // keeps the receiver (and its views) from its finalizer
	at   uint64         // rx.gen for this event
}

// Bytes returns the tensor's bytes. For a placed tensor it is the registered Buffer's memory
// (Buffer.Bytes: valid until that Buffer is freed). Otherwise it is a view into wsync's memory,
// valid only until the next Receiver.Next or Close: copy what must outlive that. Bytes returns
// nil once the view expired, for CUDA memory (use DevicePtr) and for an empty tensor.
func (t *ReceivedTensor) Bytes() []byte {
	if t.data == nil || t.NumBytes == 0 || t.DevicePtr != 0 {
		return nil
	}
	if t.Placed {
		if b := t.Buffer.Bytes(); uint64(len(b)) >= t.NumBytes {
			return b[:t.NumBytes]
		}
		return nil
	}
	if t.rx == nil || t.rx.gen.Load() != t.at {
		return nil
	}
	return unsafe.Slice((*byte)(t.data), t.NumBytes)
}

// NewReceiver joins a group: connects to the store (retrying until cfg.Timeout), checks the
// group name and rank with the sender (a mismatch: StatusRejected with the reason), and brings
// the transport up.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	const op = "wsync_receiver_init"
	if err := checkABI(); err != nil {
		return nil, err
	}
	if cfg.Rank < 0 || uint64(cfg.Rank) > 1<<32-1 {
		return nil, newError(StatusInvalidArgument, op, "ReceiverConfig.Rank is %d", cfg.Rank)
	}
	var a arena
	defer a.free()
	c := C.wsgo_receiver_config_new()
	if c == nil {
		return nil, newError(StatusOutOfMemory, op, "cannot allocate the config")
	}
	a.keep(unsafe.Pointer(c))
	c.rank = C.uint32_t(cfg.Rank)
	var err error
	if c.store_addr, err = cString(&a, cfg.StoreAddr, "ReceiverConfig.StoreAddr", op); err != nil {
		return nil, err
	}
	if c.group_name, err = cString(&a, cfg.GroupName, "ReceiverConfig.GroupName", op); err != nil {
		return nil, err
	}
	if c.transport, err = cString(&a, cfg.Transport, "ReceiverConfig.Transport", op); err != nil {
		return nil, err
	}
	if c.options, c.num_options, err = buildOptions(&a, cfg.Options, op); err != nil {
		return nil, err
	}
	c.timeout_ms = timeoutMS(cfg.Timeout)
	ev := C.wsgo_receiver_event_new()
	if ev == nil {
		return nil, newError(StatusOutOfMemory, op, "cannot allocate the event")
	}
	var rx *C.wsync_receiver_t
	if err := check(C.wsgo_receiver_init(c, &rx), op); err != nil {
		C.free(unsafe.Pointer(ev))
		return nil, err
	}
	// No finalizer: the views of an event (ReceivedTensor.Bytes) do not keep the receiver
	// reachable, and closing it would free the memory they show. Close it.
	r := &Receiver{rx: rx, ev: ev, registered: map[string]*Buffer{}}
	return r, nil
}

// Register registers parameter Buffers by name: when a later bucket carries a tensor of a
// registered name, its bytes are written straight into that Buffer and the tensor is reported as
// Placed. The incoming dtype and shape must equal the registration, else the bucket is refused
// with StatusProtocol naming the tensor. Only host Buffers can be registered (and empty tensors).
// The receiver keeps the Buffers referenced until Close or re-registration of the same name.
// Writes in place are not transactional: a failed update can leave them partly written.
func (r *Receiver) Register(tensors []Tensor) error {
	defer runtime.KeepAlive(r) // r (and what it holds) stays reachable through the C call
	const op = "wsync_receiver_register"
	if r.rx == nil {
		return closedError(op, "receiver")
	}
	for i := range tensors {
		if tensors[i].DevicePtr != 0 {
			return newError(StatusInvalidArgument, op, "tensor '%s': Register takes host Buffers only, not DevicePtr",
				tensors[i].Name)
		}
	}
	d, err := buildDescs(tensors, op)
	if err != nil {
		return err
	}
	defer d.free()
	if err := check(C.wsgo_receiver_register(r.rx, d.ptr, C.uint64_t(d.n)), op); err != nil {
		unpinAll(d.buffers)
		return err
	}
	// Keep the new borrows, return those of the names registered again.
	for i := range tensors {
		t := &tensors[i]
		if old := r.registered[t.Name]; old != nil {
			old.unpin()
		}
		r.registered[t.Name] = t.Data // nil for an empty tensor
	}
	return nil
}

// arrayStride is the step through an array the library filled (wsync.h): the struct_size of its
// first element, exactly (a newer library's descriptors may be longer than this header's); false
// when that is shorter than what the binding reads, or not a multiple of 8.
func arrayStride(structSize uint32, reads uintptr) (uintptr, bool) {
	if uintptr(structSize) < reads || structSize%8 != 0 {
		return 0, false
	}
	return uintptr(structSize), true
}

// tensorReads: of a descriptor the library fills, the binding reads the fields up to shape (ABI
// 1.0's 112 bytes), so a 1.4 library's descriptors are as readable as 1.5's.
var tensorReads = unsafe.Offsetof(C.wsync_tensor_t{}.shape) + unsafe.Sizeof(C.wsync_tensor_t{}.shape)

// maxEventTensors bounds the tensors of one event read from the library.
const maxEventTensors = 1 << 24

// Next waits up to timeout (DefaultTimeout: the receiver's timeout_ms option, 60 s; NoWait: does
// not block) for the next event.
// A StatusTimeout error means nothing arrived in time (the receiver stays usable);
// StatusPeerFailed that the sender vanished; StatusProtocol corrupted data (the update is
// refused and the sender told). The views of the previous event expire.
func (r *Receiver) Next(timeout time.Duration) (Event, error) {
	defer runtime.KeepAlive(r) // r (and what it holds) stays reachable through the C call
	const op = "wsync_receiver_next"
	if r.rx == nil {
		return Event{}, closedError(op, "receiver")
	}
	r.gen.Add(1)
	C.wsgo_receiver_event_reset(r.ev)
	if err := check(C.wsgo_receiver_next(r.rx, r.ev, timeoutMS(timeout)), op); err != nil {
		return Event{}, err
	}
	ev := r.ev
	out := Event{Kind: EventKind(ev.kind), Version: uint64(ev.version), BucketIndex: uint64(ev.bucket_index),
		PayloadBytes: uint64(ev.bytes)}
	if out.Kind != EventBucket || ev.num_tensors == 0 {
		return out, nil
	}
	n := uint64(ev.num_tensors)
	if n > maxEventTensors || ev.tensors == nil || ev.placed == nil {
		return Event{}, newError(StatusInternal, op, "the library returned %d tensors at %p (placed at %p)",
			n, ev.tensors, ev.placed)
	}
	stride, ok := arrayStride(uint32(ev.tensors.struct_size), tensorReads)
	if !ok {
		return Event{}, newError(StatusVersionMismatch, op, "the library's tensor descriptors have struct_size %d: "+
			"this binding reads %d and steps by a multiple of 8", ev.tensors.struct_size, unsafe.Sizeof(C.wsync_tensor_t{}))
	}
	placed := unsafe.Slice(ev.placed, n)
	gen := r.gen.Load()
	out.Tensors = make([]ReceivedTensor, n)
	for i := uint64(0); i < n; i++ {
		c := (*C.wsync_tensor_t)(unsafe.Add(unsafe.Pointer(ev.tensors), uintptr(i)*stride))
		if c.ndim < 0 || c.ndim > MaxNdim || c.name == nil {
			return Event{}, newError(StatusInternal, op, "the library returned tensor %d with ndim %d", i, c.ndim)
		}
		t := &out.Tensors[i]
		t.Name = C.GoString(c.name)
		t.Dtype = Dtype(c.dtype)
		t.Shape = make([]int64, c.ndim)
		for j := range t.Shape {
			t.Shape[j] = int64(c.shape[j])
		}
		t.NumBytes = uint64(c.nbytes)
		t.Placed = placed[i] != C.WSYNC_PLACED_VIEW
		t.Staged = placed[i] == C.WSYNC_PLACED_STAGED
		if t.Placed {
			t.Buffer = r.registered[t.Name]
		}
		if c.device_type == C.WSYNC_DEVICE_CUDA {
			t.DevicePtr = uintptr(c.data)
			t.DeviceIndex = int(c.device_index)
		} else {
			t.data = c.data
		}
		t.rx, t.at = r, gen
	}
	return out, nil
}

// Commit confirms that version (from the last EventCommit) is applied. The sender's Finalize
// returns once every receiver confirmed. In receive_mode staged this is where the registered
// Buffers get the version: the sender is told, then the staged bytes are copied in (if the sender
// cannot be told, nothing is copied and Commit fails).
func (r *Receiver) Commit(version uint64) error {
	defer runtime.KeepAlive(r) // r (and what it holds) stays reachable through the C call
	const op = "wsync_receiver_commit"
	if r.rx == nil {
		return closedError(op, "receiver")
	}
	return check(C.wsgo_receiver_commit(r.rx, C.uint64_t(version)), op)
}

// ReceiveMode is how registered Buffers get their bytes: the receiver option receive_mode.
type ReceiveMode int32

// The receive modes of wsync.h (ABI 1.4).
const (
	ReceiveInPlace ReceiveMode = C.WSYNC_RECEIVE_IN_PLACE // written as the buckets arrive (the default)
	ReceiveStaged  ReceiveMode = C.WSYNC_RECEIVE_STAGED   // staged, copied in by Commit only
)

// BuffersState says what the registered Buffers hold.
type BuffersState int32

// The buffer states of wsync.h (ABI 1.4).
const (
	// BuffersClean: no update wrote into them since the last commit; they hold what they held then.
	BuffersClean BuffersState = C.WSYNC_BUFFERS_CLEAN
	// BuffersMixed: since the last commit an update wrote into the Touched ones (in place: arriving,
	// waiting for its commit, or failed). Refuse to serve them until the next commit.
	BuffersMixed BuffersState = C.WSYNC_BUFFERS_MIXED
)

// ReceiverState is what the updates did to the registered Buffers (Receiver.State).
type ReceiverState struct {
	ReceiveMode      ReceiveMode
	CommittedVersion uint64       // the last version committed, 0 before any
	PendingVersion   uint64       // the version of an EventCommit not yet confirmed with Commit, else 0
	Buffers          BuffersState // clean or mixed
	// LateWrites: the transport gave up on a receive into registered Buffers and may still write
	// into them until Close (in place only). Do not repair them before Close.
	LateWrites bool
	// Touched: in place, the registered tensors written since the last commit; staged, those
	// staged for the update in progress. In the order their first bytes were posted.
	Touched     []string
	StagedBytes uint64 // staging memory held for registered tensors (staged; kept for later updates)
	// NumSenders: the senders this receiver joined (many senders, ABI 1.5; 1 otherwise). Planned:
	// they plan and wait for this receiver's needs, which Register (also with no buffers) or the
	// first Next says.
	NumSenders uint32
	Planned    bool
	// Rank: this receiver's rank, the one its config asked for or the one an elastic group's
	// sender assigned when it asked for 0 (ABI 1.5; 0 with an older library). RankAssigned: the
	// sender assigned it.
	Rank         uint32
	RankAssigned bool
}

// State returns what the updates did to the registered Buffers: whether they hold a mix (an
// engine refuses to serve until the next commit), which tensors were touched, and the staging
// memory. Call it from the goroutine that calls Next, after Next or Commit returned.
func (r *Receiver) State() (ReceiverState, error) {
	defer runtime.KeepAlive(r) // r (and what it holds) stays reachable through the C calls
	const op = "wsync_receiver_get_state"
	if r.rx == nil {
		return ReceiverState{}, closedError(op, "receiver")
	}
	var s C.wsync_receiver_state_t // no Go pointers inside: cgo may take its address
	if err := check(C.wsgo_receiver_get_state(r.rx, &s), op); err != nil {
		return ReceiverState{}, err
	}
	out := ReceiverState{ReceiveMode: ReceiveMode(s.receive_mode), CommittedVersion: uint64(s.committed_version),
		PendingVersion: uint64(s.pending_version), Buffers: BuffersState(s.buffers), LateWrites: s.late_writes != 0,
		StagedBytes: uint64(s.staged_bytes), NumSenders: uint32(s.num_senders), Planned: s.planned != 0,
		Rank: uint32(s.rank), RankAssigned: s.rank_assigned != 0}
	if out.NumSenders == 0 { // a library older than 1.5 leaves it out
		out.NumSenders = 1
	}
	if s.num_touched > maxEventTensors {
		return ReceiverState{}, newError(StatusInternal, op, "the library reported %d touched tensors", s.num_touched)
	}
	for i := C.uint64_t(0); i < s.num_touched; i++ {
		name := C.wsync_receiver_touched_name(r.rx, i)
		if name == nil {
			return ReceiverState{}, newError(StatusInternal, op, "touched name %d of %d is missing", i, s.num_touched)
		}
		out.Touched = append(out.Touched, C.GoString(name))
	}
	return out, nil
}

// CommittedVersion returns the last version this receiver committed, 0 before any (and after
// Close).
func (r *Receiver) CommittedVersion() uint64 {
	defer runtime.KeepAlive(r) // r (and what it holds) stays reachable through the C call
	if r.rx == nil {
		return 0
	}
	return uint64(C.wsync_receiver_committed_version(r.rx))
}

// Close leaves the group and frees everything; the registered Buffers are returned and views of
// the last event expire. Idempotent.
func (r *Receiver) Close() {
	if r.rx == nil {
		return
	}
	r.gen.Add(1)
	C.wsync_receiver_destroy(r.rx)
	r.rx = nil
	C.free(unsafe.Pointer(r.ev))
	r.ev = nil
	for name, b := range r.registered {
		if b != nil {
			b.unpin()
		}
		delete(r.registered, name)
	}
}
