package wsync_test

import (
	"errors"
	"testing"
	"time"

	"wsync.dev/wsync"
)

func TestUnknownOptionIsRefusedNamingTheKey(t *testing.T) {
	start := time.Now()
	_, err := wsync.NewGroup(wsync.GroupConfig{NumReceivers: 1, Timeout: testTimeout,
		Options: []wsync.Option{{Key: "timeout_ms", Value: "5000"}, {Key: "bucket_bytez", Value: "4096"}}})
	wantError(t, err, wsync.StatusInvalidArgument, "bucket_bytez")
	if time.Since(start) > testTimeout/2 {
		t.Fatalf("refusing an option took %v: it waited for receivers first", time.Since(start))
	}
	_, err = wsync.NewGroup(wsync.GroupConfig{NumReceivers: 1, Timeout: testTimeout,
		Options: []wsync.Option{{Key: "bucket_bytes", Value: "12"}}})
	wantError(t, err, wsync.StatusInvalidArgument, "bucket_bytes")
}

func TestConfigStringsWithNULAreRefused(t *testing.T) {
	_, err := wsync.NewGroup(wsync.GroupConfig{NumReceivers: 1, GroupName: "a\x00b"})
	wantError(t, err, wsync.StatusInvalidArgument, "GroupConfig.GroupName")
	_, err = wsync.NewGroup(wsync.GroupConfig{NumReceivers: 1, Options: []wsync.Option{{Key: "timeout_ms\x00", Value: "1"}}})
	wantError(t, err, wsync.StatusInvalidArgument, "timeout_ms")
	_, err = wsync.NewReceiver(wsync.ReceiverConfig{Rank: 1, StoreAddr: "127.0.0.1:1\x00"})
	wantError(t, err, wsync.StatusInvalidArgument, "ReceiverConfig.StoreAddr")
	_, err = wsync.NewGroup(wsync.GroupConfig{NumReceivers: -1})
	wantError(t, err, wsync.StatusInvalidArgument, "NumReceivers")
}

func TestReceiverNamingAnotherGroupIsRejected(t *testing.T) {
	h := newHarness(t)
	wrong := h.startReceiver(1, "not-gotest", func(r *wsync.Receiver) error { return nil })
	// The group waits for rank 1; the right receiver joins once the wrong one was refused.
	right := make(chan error, 2)
	go func() {
		err := <-wrong
		right <- err
		if err != nil {
			right <- <-h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
				ev, err := r.Next(testTimeout) // the group closes
				if err == nil && ev.Kind != wsync.EventClosed {
					err = errors.New("got event " + ev.Kind.String() + ", want closed")
				}
				return err
			})
		}
	}()
	g := h.newGroup(1)
	err := <-right
	e := wantError(t, err, wsync.StatusRejected)
	t.Logf("%v", err)
	if !errors.Is(err, wsync.ErrRejected) || e.Message == "" {
		t.Fatalf("%v: want ErrRejected with a reason", err)
	}
	g.Close()
	if err := await(t, right, "the right receiver"); err != nil {
		t.Fatalf("the right receiver: %v", err)
	}
}

// Arguments the binding checks itself are refused before the library is called, naming the
// tensor, and the group stays usable.
func TestBadTensorsAreRefusedNamingThem(t *testing.T) {
	h := newHarness(t)
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		for {
			ev, err := r.Next(testTimeout)
			if err != nil {
				return err
			}
			switch ev.Kind {
			case wsync.EventCommit:
				if err := r.Commit(ev.Version); err != nil {
					return err
				}
			case wsync.EventClosed:
				return nil
			}
		}
	})
	g := h.newGroup(1)
	freed := wsync.NewBuffer(16)
	freed.Free()
	buf := wsync.NewBuffer(24)
	cases := []struct {
		t    wsync.Tensor
		want string
	}{
		{wsync.Tensor{Name: "nine.dims", Dtype: wsync.DtypeUint8, Shape: []int64{1, 1, 1, 1, 1, 1, 1, 1, 1}}, "'nine.dims' has 9 dimensions"},
		{wsync.Tensor{Name: "neg", Dtype: wsync.DtypeFloat32, Shape: []int64{2, -3}, Data: buf}, "'neg' has a negative dimension"},
		{wsync.Tensor{Name: "short", Dtype: wsync.DtypeFloat32, Shape: []int64{2, 4}, Data: buf}, "'short': shape [2 4] of float32 is 32 bytes but it has a Buffer of 24 bytes"},
		{wsync.Tensor{Name: "nodata", Dtype: wsync.DtypeFloat32, Shape: []int64{6}}, "'nodata': shape [6] of float32 is 24 bytes but it has no Data"},
		{wsync.Tensor{Name: "bad\x00name", Dtype: wsync.DtypeFloat32, Shape: []int64{6}, Data: buf}, "NUL"},
		{wsync.Tensor{Name: "dtype", Dtype: wsync.Dtype(99), Shape: []int64{6}, Data: buf}, "'dtype' has unknown dtype 99"},
		{wsync.Tensor{Name: "freed", Dtype: wsync.DtypeFloat32, Shape: []int64{4}, Data: freed}, "'freed': its Buffer was freed"},
		{wsync.Tensor{Name: "both", Dtype: wsync.DtypeFloat32, Shape: []int64{6}, Data: buf, DevicePtr: 0x1000}, "'both' has both Data and DevicePtr"},
		{wsync.Tensor{Name: "huge", Dtype: wsync.DtypeFloat64, Shape: []int64{1 << 40, 1 << 40}}, "'huge': shape"},
	}
	for _, c := range cases {
		good := wsync.Tensor{Name: "good", Dtype: wsync.DtypeFloat32, Shape: []int64{6}, Data: buf}
		err := g.SendBatch([]wsync.Tensor{good, c.t}, testTimeout)
		wantError(t, err, wsync.StatusInvalidArgument, c.want)
		if _, err := g.SendStart([]wsync.Tensor{c.t}, testTimeout); err == nil {
			t.Fatalf("SendStart took %q", c.t.Name)
		}
	}
	// The library's own check: a duplicate name within one update.
	dup := wsync.Tensor{Name: "dup", Dtype: wsync.DtypeFloat32, Shape: []int64{6}, Data: buf}
	wantError(t, g.SendBatch([]wsync.Tensor{dup, dup}, testTimeout), wsync.StatusInvalidArgument, "dup")
	// Nothing was started: the group still works, and buf is no longer borrowed.
	if err := g.SendBatch([]wsync.Tensor{{Name: "w", Dtype: wsync.DtypeFloat32, Shape: []int64{2, 3}, Data: buf}}, testTimeout); err != nil {
		h.fatalf("a good batch after refused ones: %v", err)
	}
	if err := g.Finalize(1, testTimeout); err != nil {
		h.fatalf("Finalize: %v", err)
	}
	buf.Free()
	if buf.Len() != 0 || buf.Bytes() != nil {
		t.Fatal("a freed Buffer still has bytes")
	}
	g.Close()
	if err := await(t, rx, "receiver"); err != nil {
		t.Fatal(err)
	}
}
