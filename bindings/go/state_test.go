package wsync_test

import (
	"reflect"
	"testing"

	"wsync.dev/wsync"
)

// stateSeen is what the receiver of testModes saw, with the checksum of "w" at each moment.
type stateSeen struct {
	atCommitEvent, afterCommit, afterAbandon wsync.ReceiverState
	sumAtEvent, sumAfterCommit, sumAbandoned uint64
	abandoned                                bool
}

// runModes: version 1 commits, version 2 is abandoned mid-update (the group closed), on a
// receiver in `mode` whose registered Buffer "w" starts as zeros.
func runModes(t *testing.T, mode string) stateSeen {
	h := newHarness(t)
	spec := tensorSpec{"w", wsync.DtypeFloat32, []int64{1000}}
	seenCh := make(chan stateSeen, 1)
	errCh := make(chan error, 1)
	go func() {
		addr, err := h.readAddr()
		if err != nil {
			errCh <- err
			return
		}
		r, err := wsync.NewReceiver(wsync.ReceiverConfig{Rank: 1, StoreAddr: addr, GroupName: "gotest",
			Options: []wsync.Option{{Key: "receive_mode", Value: mode}}, Timeout: testTimeout})
		if err != nil {
			errCh <- err
			return
		}
		defer r.Close()
		w := wsync.NewBuffer(spec.nbytes())
		if err := r.Register([]wsync.Tensor{{Name: "w", Dtype: spec.dtype, Shape: spec.shape, Data: w}}); err != nil {
			errCh <- err
			return
		}
		var seen stateSeen
		state := func() wsync.ReceiverState {
			s, err := r.State()
			if err != nil {
				t.Errorf("State: %v", err)
			}
			return s
		}
		buckets := 0
		for {
			ev, err := r.Next(testTimeout)
			if err == nil && ev.Kind == wsync.EventBucket {
				for _, x := range ev.Tensors {
					if !x.Placed || x.Staged != (mode == "staged") || x.Buffer != w {
						t.Errorf("tensor %s: Placed %v Staged %v Buffer %p (registered %p)", x.Name, x.Placed, x.Staged, x.Buffer, w)
					}
				}
				buckets++
				continue
			}
			if err == nil && ev.Kind == wsync.EventCommit {
				seen.atCommitEvent, seen.sumAtEvent = state(), checksum(w.Bytes())
				if err := r.Commit(ev.Version); err != nil {
					errCh <- err
					return
				}
				seen.afterCommit, seen.sumAfterCommit = state(), checksum(w.Bytes())
				buckets = 0
				continue
			}
			if buckets > 0 || err != nil {
				seen.afterAbandon, seen.sumAbandoned, seen.abandoned = state(), checksum(w.Bytes()), buckets > 0
				seenCh <- seen
				errCh <- nil
				return
			}
			if ev.Kind == wsync.EventClosed {
				seenCh <- seen
				errCh <- nil
				return
			}
		}
	}()
	g := h.newGroup(1)
	data := wsync.NewBuffer(spec.nbytes())
	defer data.Free()
	for v := uint64(1); v <= 2; v++ {
		fill("w", v, data.Bytes())
		if err := g.SendBatch([]wsync.Tensor{{Name: "w", Dtype: spec.dtype, Shape: spec.shape, Data: data}}, testTimeout); err != nil {
			h.fatalf("SendBatch %d: %v", v, err)
		}
		if v == 1 {
			if err := g.Finalize(1, testTimeout); err != nil {
				h.fatalf("Finalize: %v", err)
			}
		}
	}
	g.Close() // version 2 never commits
	if err := await(t, errCh, "receiver"); err != nil {
		t.Fatalf("receiver: %v", err)
	}
	seen := <-seenCh
	if !seen.abandoned {
		t.Fatalf("the receiver saw no bucket of version 2")
	}
	return seen
}

func TestStagedBuffersChangeOnlyAtCommit(t *testing.T) {
	spec := tensorSpec{"w", wsync.DtypeFloat32, []int64{1000}}
	s := runModes(t, "staged")
	zero := checksum(make([]byte, spec.nbytes()))
	if s.sumAtEvent != zero {
		t.Errorf("staged: the Buffer changed before Commit")
	}
	want := wsync.ReceiverState{NumSenders: 1, Rank: 1, ReceiveMode: wsync.ReceiveStaged, PendingVersion: 1, Buffers: wsync.BuffersClean,
		Touched: []string{"w"}, StagedBytes: uint64(spec.nbytes())}
	if !reflect.DeepEqual(s.atCommitEvent, want) {
		t.Errorf("at the commit event: %+v, want %+v", s.atCommitEvent, want)
	}
	if s.sumAfterCommit != expected(spec, 1) || s.afterCommit.CommittedVersion != 1 || len(s.afterCommit.Touched) != 0 {
		t.Errorf("after Commit: %+v (checksum ok: %v)", s.afterCommit, s.sumAfterCommit == expected(spec, 1))
	}
	want = wsync.ReceiverState{NumSenders: 1, Rank: 1, ReceiveMode: wsync.ReceiveStaged, CommittedVersion: 1, Buffers: wsync.BuffersClean,
		StagedBytes: uint64(spec.nbytes())}
	if !reflect.DeepEqual(s.afterAbandon, want) || s.sumAbandoned != expected(spec, 1) {
		t.Errorf("after the abandoned update: %+v (version 1 intact: %v), want %+v", s.afterAbandon,
			s.sumAbandoned == expected(spec, 1), want)
	}
}

func TestInPlaceBuffersReportAMix(t *testing.T) {
	spec := tensorSpec{"w", wsync.DtypeFloat32, []int64{1000}}
	s := runModes(t, "in_place")
	if s.sumAtEvent != expected(spec, 1) || s.atCommitEvent.Buffers != wsync.BuffersMixed {
		t.Errorf("at the commit event: %+v", s.atCommitEvent)
	}
	if s.afterCommit.Buffers != wsync.BuffersClean {
		t.Errorf("after Commit: %+v", s.afterCommit)
	}
	want := wsync.ReceiverState{NumSenders: 1, Rank: 1, ReceiveMode: wsync.ReceiveInPlace, CommittedVersion: 1, Buffers: wsync.BuffersMixed,
		Touched: []string{"w"}}
	if !reflect.DeepEqual(s.afterAbandon, want) || s.sumAbandoned != expected(spec, 2) {
		t.Errorf("after the abandoned update: %+v (holds version 2: %v), want %+v", s.afterAbandon,
			s.sumAbandoned == expected(spec, 2), want)
	}
}
