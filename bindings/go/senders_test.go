package wsync_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"wsync.dev/wsync"
)

// Many senders (ABI 1.5) through the Go binding, over UCX: two sender goroutines publish their rows
// of "w" (slices) and the same "b" (a replica); a receiver registers the whole tensors and must
// hold every byte of each version after its commit, each sender having computed one plan.
func TestTwoSendersPublishSlicesAndTheReceiverGetsWholeTensors(t *testing.T) {
	const rows, cols, versions = 10, 6, 2
	dir := t.TempDir()
	s0 := filepath.Join(dir, "s0.addr")
	readFile := func(path string) string {
		deadline := time.Now().Add(testTimeout)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				return strings.TrimSpace(string(b))
			}
			time.Sleep(10 * time.Millisecond)
		}
		return ""
	}
	full := func(name string, v uint64, n int) []byte {
		b := make([]byte, n)
		fill(name, v, b)
		return b
	}
	senderDone := make(chan error, 2)
	for k := 0; k < 2; k++ {
		go func(k int) {
			opts := []wsync.Option{{Key: "num_senders", Value: "2"}, {Key: "sender_rank", Value: strconv.Itoa(k)},
				{Key: "timeout_ms", Value: "10000"}}
			if k == 0 {
				opts = append(opts, wsync.Option{Key: "store_addr_file", Value: s0})
			} else {
				opts = append(opts, wsync.Option{Key: "sender0_store", Value: readFile(s0)})
			}
			g, err := wsync.NewGroup(wsync.GroupConfig{NumReceivers: 1, GroupName: "go-senders", StoreAddr: "127.0.0.1:0",
				Options: opts, Timeout: testTimeout})
			if err != nil {
				senderDone <- err
				return
			}
			defer g.Close()
			half := rows / 2
			for v := uint64(1); v <= versions; v++ {
				w := wsync.NewBuffer(half * cols * 4)
				copy(w.Bytes(), full("w", v, rows*cols*4)[k*half*cols*4:])
				b := wsync.NewBuffer(cols * 4)
				copy(b.Bytes(), full("b", v, cols*4))
				err = g.SendBatch([]wsync.Tensor{
					{Name: "w", Dtype: wsync.DtypeFloat32, Shape: []int64{int64(half), cols}, Data: w,
						FullShape: []int64{rows, cols}, Offset: []int64{int64(k * half), 0}},
					{Name: "b", Dtype: wsync.DtypeFloat32, Shape: []int64{cols}, Data: b, Replica: true},
				}, wsync.DefaultTimeout)
				if err == nil {
					err = g.Finalize(v, wsync.DefaultTimeout)
				}
				if err != nil {
					senderDone <- err
					return
				}
			}
			st, err := g.Stats()
			if err == nil && st.PlansComputed != 1 {
				t.Errorf("sender %d computed %d plans, want 1 (the plan repeats)", k, st.PlansComputed)
			}
			senderDone <- err
		}(k)
	}
	addr := readFile(s0)
	r, err := wsync.NewReceiver(wsync.ReceiverConfig{Rank: 1, StoreAddr: addr, GroupName: "go-senders", Timeout: testTimeout})
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	defer r.Close()
	w, b := wsync.NewBuffer(rows*cols*4), wsync.NewBuffer(cols*4)
	if err := r.Register([]wsync.Tensor{{Name: "w", Dtype: wsync.DtypeFloat32, Shape: []int64{rows, cols}, Data: w},
		{Name: "b", Dtype: wsync.DtypeFloat32, Shape: []int64{cols}, Data: b}}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	for {
		ev, err := r.Next(testTimeout)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if ev.Kind == wsync.EventClosed {
			break
		}
		if ev.Kind != wsync.EventCommit {
			continue
		}
		if err := r.Commit(ev.Version); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if !bytes.Equal(w.Bytes(), full("w", ev.Version, rows*cols*4)) || !bytes.Equal(b.Bytes(), full("b", ev.Version, cols*4)) {
			t.Fatalf("version %d: the registered buffers differ from the senders' tensors", ev.Version)
		}
	}
	if r.CommittedVersion() != versions {
		t.Fatalf("committed %d, want %d", r.CommittedVersion(), versions)
	}
	for k := 0; k < 2; k++ {
		if err := <-senderDone; err != nil {
			t.Fatalf("a sender: %v", err)
		}
	}
}

func TestASliceThatDoesNotFitIsRefused(t *testing.T) {
	h := newHarness(t)
	h.startReceiver(1, "gotest", func(r *wsync.Receiver) error { _, err := r.Next(testTimeout); return err })
	g := h.newGroup(1)
	err := g.SendBatch([]wsync.Tensor{{Name: "w", Dtype: wsync.DtypeUint8, Shape: []int64{2}, Data: wsync.NewBuffer(2),
		FullShape: []int64{3}, Offset: []int64{2}}}, wsync.DefaultTimeout)
	wantError(t, err, wsync.StatusInvalidArgument, "does not fit")
}
