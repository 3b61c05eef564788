package wsync

/*
#include <stdlib.h>

#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// GroupConfig configures NewGroup. Zero values mean the library's defaults.
type GroupConfig struct {
	NumReceivers int           // required: receivers expected to join (ranks 1..NumReceivers)
	GroupName    string        // "" = "wsync"; receivers must name the same group
	StoreAddr    string        // "host:port" of the rendezvous store; "" = "127.0.0.1:0" (a free port)
	Transport    string        // plugin name or absolute path; "" = the default (ucx on one host, tcp across hosts)
	Adapter      string        // plugin name or absolute path; "" = "native"
	Options      []Option      // group options, passed in this order
	Timeout      time.Duration // how long NewGroup waits for every receiver; <= 0 = the timeout_ms option (60 s)
}

// Group is the sender half of wsync: the trainer. Create it with NewGroup, send the tensors of
// an update with SendBatch or SendStart, close the update with Finalize, and Close the group.
//
// Threading: call the methods of a Group from one goroutine at a time (any goroutine), except
// Abort, which is safe from any goroutine at any time, also during or after Close.
type Group struct {
	abortMu   sync.Mutex       // orders Abort against Close: destroy never races with abort
	g         *C.wsync_group_t // nil once closed; written under abortMu
	storeAddr string
	inflight  []flight // batches started and not yet known to be done, oldest first
}

// flight is a started batch and the Buffers wsync borrows until it is done.
type flight struct {
	ticket  uint64
	buffers []*Buffer
}

// Send is a batch started with Group.SendStart.
type Send struct {
	grp    *Group
	ticket uint64
	done   bool  // the library answered something other than "not yet"
	err    error // what it answered then
}

// NewGroup creates a group: loads the transport and adapter plugins, hosts the rendezvous store,
// and waits up to cfg.Timeout until all cfg.NumReceivers receivers joined. A failure names the
// receiver, option or plugin at fault (an unknown option: StatusInvalidArgument naming the key).
func NewGroup(cfg GroupConfig) (*Group, error) {
	const op = "wsync_group_init"
	if err := checkABI(); err != nil {
		return nil, err
	}
	if cfg.NumReceivers < 0 || uint64(cfg.NumReceivers) > 1<<32-1 {
		return nil, newError(StatusInvalidArgument, op, "GroupConfig.NumReceivers is %d", cfg.NumReceivers)
	}
	var a arena
	defer a.free()
	c := C.wsgo_group_config_new()
	if c == nil {
		return nil, newError(StatusOutOfMemory, op, "cannot allocate the config")
	}
	a.keep(unsafe.Pointer(c))
	c.num_receivers = C.uint32_t(cfg.NumReceivers)
	var err error
	for _, f := range []struct {
		dst   **C.char
		val   string
		field string
	}{
		{&c.group_name, cfg.GroupName, "GroupConfig.GroupName"},
		{&c.store_addr, cfg.StoreAddr, "GroupConfig.StoreAddr"},
		{&c.transport, cfg.Transport, "GroupConfig.Transport"},
		{&c.adapter, cfg.Adapter, "GroupConfig.Adapter"},
	} {
		if *f.dst, err = cString(&a, f.val, f.field, op); err != nil {
			return nil, err
		}
	}
	if c.options, c.num_options, err = buildOptions(&a, cfg.Options, op); err != nil {
		return nil, err
	}
	c.timeout_ms = timeoutMS(cfg.Timeout)
	var g *C.wsync_group_t
	if err := check(C.wsgo_group_init(c, &g), op); err != nil {
		return nil, err
	}
	grp := &Group{g: g, storeAddr: C.GoString(C.wsync_group_store_addr(g))}
	runtime.SetFinalizer(grp, (*Group).Close)
	return grp, nil
}

// StoreAddr returns "host:port" the group's store listens on (the port chosen for port 0), the
// address receivers join. "" after Close.
func (grp *Group) StoreAddr() string {
	if grp.g == nil {
		return ""
	}
	return grp.storeAddr
}

// closedError is what the methods of a closed Group or Receiver return.
func closedError(op, what string) error {
	return newError(StatusInvalidState, op, "the %s is closed", what)
}

// SendBatch sends one batch of the current update to every receiver and returns when every
// receiver acknowledged it. The Buffers are read only during the call. timeout bounds each wait
// for a receiver (DefaultTimeout or NoWait: the group's timeout_ms option; a receiver cannot
// answer in no time). After a failure the update is broken:
// Close the group. A failure names the receiver (rank) or tensor at fault.
func (grp *Group) SendBatch(tensors []Tensor, timeout time.Duration) error {
	defer runtime.KeepAlive(grp) // its finalizer must not close it during the C call
	const op = "wsync_group_send_batch"
	if grp.g == nil {
		return closedError(op, "group")
	}
	d, err := buildDescs(tensors, op)
	if err != nil {
		return err
	}
	defer d.free()
	err = check(C.wsgo_group_send_batch(grp.g, d.ptr, C.uint64_t(d.n), timeoutMS(timeout)), op)
	unpinAll(d.buffers)
	if err == nil { // its batch was the last started: every earlier one was delivered too
		grp.release(^uint64(0))
	}
	return err
}

// SendStart starts moving one batch and returns without waiting for it, so the caller can
// produce the next batch meanwhile. The group keeps the Buffers referenced until the batch is
// done; do not overwrite or reuse them before Send.Wait (for this batch or a later one) returned
// done or an error, or Finalize or Close returned.
//
// On any refusal (a bad tensor, a duplicate name) nothing starts and the group stays usable. At
// most the option staging_buckets (default 2) batches are in flight: when that many are, SendStart
// first waits up to timeout for the oldest, and returns a StatusTimeout error, starting nothing,
// if none finished (NoWait: at once). timeout also bounds each wait of this batch for a receiver
// (NoWait there: the group's timeout_ms option).
func (grp *Group) SendStart(tensors []Tensor, timeout time.Duration) (*Send, error) {
	defer runtime.KeepAlive(grp) // its finalizer must not close it during the C call
	const op = "wsync_group_send_start"
	if grp.g == nil {
		return nil, closedError(op, "group")
	}
	d, err := buildDescs(tensors, op)
	if err != nil {
		return nil, err
	}
	defer d.free()
	var ticket C.uint64_t
	if err := check(C.wsgo_group_send_start(grp.g, d.ptr, C.uint64_t(d.n), timeoutMS(timeout), &ticket), op); err != nil {
		unpinAll(d.buffers)
		return nil, err
	}
	grp.inflight = append(grp.inflight, flight{ticket: uint64(ticket), buffers: d.buffers})
	return &Send{grp: grp, ticket: uint64(ticket)}, nil
}

// Ticket returns the batch's number: 1 for the group's first started batch, then one more each.
func (s *Send) Ticket() uint64 { return s.ticket }

// Wait waits up to timeout (DefaultTimeout: the group's timeout_ms option; NoWait: does not block,
// like Done) for the batch to be released: wsync no longer reads its Buffers, nor those of any
// batch started before it (each bucket packed into staging or sent on its first hop; Finalize
// waits for delivery to every receiver).
//
//   - (true, nil): released; the Buffers are the caller's again.
//   - (false, nil): not yet; the batch is still in flight. Wait again.
//   - (false, err): the batch, an earlier one, or the group failed or was aborted (ErrAborted);
//     the group is broken. A receiver that did not answer in time is a StatusPeerFailed error
//     naming it: a timeout of Wait itself only ever means "not yet". wsync no longer reads the
//     Buffers of this batch or earlier ones.
//
// Waiting again after done or an error returns the same answer at once.
func (s *Send) Wait(timeout time.Duration) (done bool, err error) {
	return s.wait(timeoutMS(timeout))
}

// Done tests, without blocking, whether the batch was released; it answers as Wait does.
func (s *Send) Done() (bool, error) {
	return s.wait(0)
}

func (s *Send) wait(ms C.int64_t) (bool, error) {
	const op = "wsync_group_send_wait"
	if s.done {
		return s.err == nil, s.err
	}
	grp := s.grp
	defer runtime.KeepAlive(grp)
	if grp.g == nil {
		return false, closedError(op, "group")
	}
	err := check(C.wsgo_group_send_wait(grp.g, C.uint64_t(s.ticket), ms), op)
	if e, ok := err.(*Error); ok && e.Status == StatusTimeout {
		return false, nil
	}
	// Delivered or failed: this batch and every earlier one are no longer read.
	grp.release(s.ticket)
	s.done, s.err = true, err
	return err == nil, err
}

// release returns the Buffers of the started batches with a ticket <= last.
func (grp *Group) release(last uint64) {
	i := 0
	for ; i < len(grp.inflight) && grp.inflight[i].ticket <= last; i++ {
		unpinAll(grp.inflight[i].buffers)
		grp.inflight[i] = flight{}
	}
	grp.inflight = grp.inflight[i:]
}

// SetCUDAStream sets the cudaStream_t (as a uintptr; 0 = the legacy default stream) that
// produces the CUDA tensors of the following sends: work queued on it before a send is seen.
func (grp *Group) SetCUDAStream(stream uintptr) error {
	defer runtime.KeepAlive(grp) // its finalizer must not close it during the C call
	const op = "wsync_group_set_cuda_stream"
	if grp.g == nil {
		return closedError(op, "group")
	}
	return check(C.wsgo_group_set_cuda_stream(grp.g, C.uintptr_t(stream)), op)
}

// Finalize closes the current update as weight version `version` (greater than the last
// committed one): batches still in flight are delivered first, then every receiver commits and
// confirms. timeout bounds each wait for a receiver (DefaultTimeout or NoWait: the group's
// timeout_ms option). The
// next send starts a new update.
func (grp *Group) Finalize(version uint64, timeout time.Duration) error {
	defer runtime.KeepAlive(grp) // its finalizer must not close it during the C call
	const op = "wsync_group_finalize"
	if grp.g == nil {
		return closedError(op, "group")
	}
	err := check(C.wsgo_group_finalize(grp.g, C.uint64_t(version), timeoutMS(timeout)), op)
	if err == nil { // every started batch was delivered
		grp.release(^uint64(0))
	}
	return err
}

// GroupStats are the counters of a group (Group.Stats).
type GroupStats struct {
	NumReceivers       int
	CommittedVersion   uint64        // 0 before the first Finalize
	Updates            uint64        // finalized updates
	Batches            uint64        // delivered batches, over all updates
	Buckets            uint64        // buckets moved, over all updates
	Tensors            uint64        // tensors sent (a split tensor counts once)
	Bytes              uint64        // tensor bytes sent per receiver
	StagingBytes       uint64        // host staging memory held by the group
	SendTime           time.Duration // wall time batches were in flight (overlapping batches count once)
	DeviceStagingBytes uint64        // CUDA staging memory held by the group
	PlansComputed      uint64        // many senders: ownership plans computed (a repeated plan is reused)
	Members            int           // receivers in the group now (membership=elastic removes those that fail)
	MembersLeft        int           // receivers removed since init
}

// MemberEvent says a receiver left or joined the group (option membership=elastic; Group.MemberEvents).
type MemberEvent struct {
	Left   bool   // it left (true), or joined between updates (false: Status StatusOK)
	Rank   int    // its rank
	Status Status // what removed it: StatusPeerFailed, StatusTimeout, or its refusal's status
	Update uint64 // the update it left in (1 for the first), or the first one it takes part in
	Reason string // what happened, naming the receiver
}

// Members returns the ranks of the receivers in the group now, ascending (option
// membership=elastic removes those that fail).
func (grp *Group) Members() ([]int, error) {
	defer runtime.KeepAlive(grp)
	const op = "wsync_group_members"
	if grp.g == nil {
		return nil, closedError(op, "group")
	}
	var count C.uint64_t
	if err := check(C.wsgo_group_members(grp.g, nil, 0, &count), op); err != nil {
		return nil, err
	}
	if count == 0 {
		return []int{}, nil
	}
	ranks := (*C.uint32_t)(C.malloc(C.size_t(count) * 4))
	defer C.free(unsafe.Pointer(ranks))
	capacity := count
	if err := check(C.wsgo_group_members(grp.g, ranks, capacity, &count), op); err != nil {
		return nil, err
	}
	if count > capacity {
		count = capacity
	}
	out := make([]int, int(count))
	for i, r := range unsafe.Slice(ranks, int(count)) {
		out[i] = int(r)
	}
	return out, nil
}

// MemberEvents returns every member event not taken yet, oldest first; it never blocks.
func (grp *Group) MemberEvents() ([]MemberEvent, error) {
	defer runtime.KeepAlive(grp)
	const op = "wsync_group_next_member_event"
	if grp.g == nil {
		return nil, closedError(op, "group")
	}
	var out []MemberEvent
	for {
		var e C.wsync_member_event_t // the reason is the group's until its next call: copied below
		r := C.wsgo_group_next_member_event(grp.g, &e)
		if Status(r.status) == StatusNotFound {
			C.free(unsafe.Pointer(r.message))
			return out, nil
		}
		if err := check(r, op); err != nil {
			return nil, err
		}
		out = append(out, MemberEvent{Left: e.kind == C.WSYNC_MEMBER_LEFT, Rank: int(e.rank), Status: Status(e.status),
			Update: uint64(e.update), Reason: C.GoString(e.reason)})
	}
}

// Stats returns the group's counters. Safe while batches are in flight (they then include what
// has been delivered so far).
func (grp *Group) Stats() (GroupStats, error) {
	defer runtime.KeepAlive(grp) // its finalizer must not close it during the C call
	const op = "wsync_group_get_stats"
	if grp.g == nil {
		return GroupStats{}, closedError(op, "group")
	}
	var s C.wsync_group_stats_t // no pointers inside: Go memory is fine for C to fill
	s.struct_size = C.WSYNC_GROUP_STATS_STRUCT_SIZE
	if err := check(C.wsgo_group_get_stats(grp.g, &s), op); err != nil {
		return GroupStats{}, err
	}
	return GroupStats{
		NumReceivers:       int(s.num_receivers),
		CommittedVersion:   uint64(s.committed_version),
		Updates:            uint64(s.updates),
		Batches:            uint64(s.batches),
		Buckets:            uint64(s.buckets),
		Tensors:            uint64(s.tensors),
		Bytes:              uint64(s.bytes),
		StagingBytes:       uint64(s.staging_bytes),
		SendTime:           time.Duration(float64(s.send_seconds) * float64(time.Second)),
		DeviceStagingBytes: uint64(s.device_staging_bytes),
		PlansComputed:      uint64(s.plans_computed),
		Members:            int(s.members),
		MembersLeft:        int(s.members_left),
	}, nil
}

// Abort makes any call in progress on the group return ErrAborted soon (within ~100 ms), and
// every later send and Finalize. Receivers in the middle of an update get EventAborted (the
// update never commits). Safe from any goroutine at any time; idempotent; a no-op once Close
// started.
func (grp *Group) Abort() {
	grp.abortMu.Lock()
	defer grp.abortMu.Unlock()
	if grp.g != nil {
		C.wsync_group_abort(grp.g)
	}
}

// Close tears the group down: receivers are told the group closed (EventClosed; in the middle of
// an update a receiver may get EventAborted, or ErrAborted from Next when a bucket was
// abandoned), the store stops, batches still in flight are abandoned and their Buffers returned.
// Idempotent. Not concurrently with other methods of the group but Abort.
func (grp *Group) Close() {
	grp.abortMu.Lock() // waits for an Abort in progress; later ones see nil
	g := grp.g
	grp.g = nil
	grp.abortMu.Unlock()
	if g == nil {
		return
	}
	runtime.SetFinalizer(grp, nil)
	C.wsync_group_destroy(g)
	grp.release(^uint64(0))
}
