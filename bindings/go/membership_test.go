package wsync_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"wsync.dev/wsync"
)

// Option membership=elastic with commit_quorum=1: rank 2 leaves once the group is up; the updates
// commit on rank 1, the group names rank 2 in a member event, and no rebuild is needed.
func TestElasticMembershipRemovesAReceiverThatLeft(t *testing.T) {
	h := newHarness(t)
	up := make(chan struct{})
	stays := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		commits := 0
		for {
			ev, err := r.Next(testTimeout)
			if err != nil {
				return fmt.Errorf("Next: %w", err)
			}
			switch ev.Kind {
			case wsync.EventCommit:
				if err := r.Commit(ev.Version); err != nil {
					return err
				}
				commits++
			case wsync.EventClosed:
				if commits != 2 {
					return fmt.Errorf("%d commits, want 2", commits)
				}
				return nil
			}
		}
	})
	leaves := h.startReceiver(2, "gotest", func(r *wsync.Receiver) error { <-up; return nil })
	g := h.newGroup(2, wsync.Option{Key: "membership", Value: "elastic"}, wsync.Option{Key: "commit_quorum", Value: "1"})
	close(up)
	if err := await(t, leaves, "receiver 2"); err != nil {
		h.fatalf("receiver 2: %v", err)
	}
	for v := uint64(1); v <= 2; v++ {
		ts := []wsync.Tensor{{Name: "w", Dtype: wsync.DtypeFloat32, Shape: []int64{1024}, Data: wsync.NewBuffer(4096)}}
		if err := g.SendBatch(ts, testTimeout); err != nil {
			h.fatalf("version %d: SendBatch: %v", v, err)
		}
		if err := g.Finalize(v, testTimeout); err != nil {
			h.fatalf("version %d: Finalize: %v", v, err)
		}
	}
	events, err := g.MemberEvents()
	if err != nil || len(events) != 1 {
		h.fatalf("MemberEvents() = %+v, %v; want one", events, err)
	}
	e := events[0]
	if !e.Left || e.Rank != 2 || e.Status != wsync.StatusPeerFailed || e.Update != 1 || !strings.Contains(e.Reason, "receiver rank 2") {
		h.fatalf("member event %+v: want rank 2 left in update 1 (peer failed)", e)
	}
	if again, err := g.MemberEvents(); err != nil || len(again) != 0 {
		h.fatalf("MemberEvents() again = %+v, %v; want none", again, err)
	}
	if m, err := g.Members(); err != nil || !reflect.DeepEqual(m, []int{1}) {
		h.fatalf("Members() = %v, %v; want [1]", m, err)
	}
	s, err := g.Stats()
	if err != nil || s.CommittedVersion != 2 || s.Members != 1 || s.MembersLeft != 1 {
		h.fatalf("Stats() = %+v, %v", s, err)
	}
	g.Close()
	if err := await(t, stays, "receiver 1"); err != nil {
		t.Fatalf("receiver 1: %v", err)
	}
}
