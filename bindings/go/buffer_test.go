package wsync_test

import (
	"testing"
	"time"

	"wsync.dev/wsync"
)

func TestBufferBounds(t *testing.T) {
	b := wsync.NewBuffer(10)
	if b.Len() != 10 || len(b.Bytes()) != 10 || cap(b.Bytes()) != 10 || b.Pointer() == nil {
		t.Fatalf("Len %d, Bytes %d/%d", b.Len(), len(b.Bytes()), cap(b.Bytes()))
	}
	for i, x := range b.Bytes() {
		if x != 0 {
			t.Fatalf("byte %d is %d: NewBuffer must zero", i, x)
		}
	}
	if len(b.Float32s()) != 2 || len(b.Float64s()) != 1 || len(b.Int32s()) != 2 || len(b.Int64s()) != 1 ||
		len(b.Uint16s()) != 5 {
		t.Fatal("typed views cover more or less than the Buffer")
	}
	b.Float32s()[1] = 1.5
	if b.Bytes()[7] != 0x3f || b.Bytes()[6] != 0xc0 {
		t.Fatalf("Float32s does not view the same bytes: % x", b.Bytes())
	}
	b.Free()
	b.Free() // idempotent
	if b.Len() != 0 || b.Bytes() != nil || b.Float32s() != nil || b.Pointer() != nil {
		t.Fatal("a freed Buffer still has memory")
	}
	e := wsync.NewBuffer(0)
	if e.Len() != 0 || e.Bytes() != nil {
		t.Fatal("an empty Buffer has bytes")
	}
	var nilBuf *wsync.Buffer
	if nilBuf.Len() != 0 || nilBuf.Bytes() != nil {
		t.Fatal("a nil Buffer has bytes")
	}
	nilBuf.Free()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("NewBuffer(-1) did not panic")
			}
		}()
		wsync.NewBuffer(-1)
	}()
}

// A registered Buffer stays allocated after Free until the receiver lets go of it (Close).
func TestRegisteredBufferOutlivesFree(t *testing.T) {
	h := newHarness(t)
	buf := wsync.NewBuffer(64)
	reg := make(chan error, 1)
	release := make(chan struct{})
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		err := r.Register([]wsync.Tensor{{Name: "w", Dtype: wsync.DtypeFloat32, Shape: []int64{16}, Data: buf}})
		reg <- err
		<-release
		return err
	})
	g := h.newGroup(1)
	if err := <-reg; err != nil {
		h.fatalf("Register: %v", err)
	}
	buf.Free()
	if !wsync.BufferAllocated(buf) {
		t.Fatal("Free released a registered Buffer")
	}
	close(release)
	if err := await(t, rx, "receiver"); err != nil { // returning closes the receiver
		t.Fatal(err)
	}
	if wsync.BufferAllocated(buf) {
		t.Fatal("the receiver's Close did not release the freed Buffer")
	}
	g.Close()
}

// UCX's signal handlers must not take SIGSEGV from Go: a nil dereference after the transport
// loaded is still a recoverable panic (the binding sets UCX_ERROR_SIGNALS).
func TestNilDereferenceStillPanicsWithUCXLoaded(t *testing.T) {
	h := newHarness(t)
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error { _, err := untilEnd(r); return err })
	g := h.newGroup(1)
	recovered := func() (r interface{}) {
		defer func() { r = recover() }()
		var p *struct{ x int }
		p.x = 1
		return nil
	}()
	if recovered == nil {
		t.Fatal("no panic")
	}
	g.Close()
	select {
	case <-rx:
	case <-time.After(testTimeout):
		t.Fatal("receiver did not finish")
	}
}
