package wsync_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"wsync.dev/wsync"
)

// untilEnd calls Next until the group closes or aborts the update, and returns that event's kind.
func untilEnd(r *wsync.Receiver) (wsync.EventKind, error) {
	for {
		ev, err := r.Next(testTimeout)
		if err != nil {
			return wsync.EventNone, err
		}
		if ev.Kind == wsync.EventClosed || ev.Kind == wsync.EventAborted {
			return ev.Kind, nil
		}
	}
}

// Closing (destroying) the group in the middle of an update: the receiver is told, it does not hang.
func TestCloseGroupDuringAnUpdate(t *testing.T) {
	h := newHarness(t)
	kind := make(chan wsync.EventKind, 1)
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		k, err := untilEnd(r)
		kind <- k
		return err
	})
	g := h.newGroup(1, wsync.Option{Key: "bucket_bytes", Value: "4096"})
	if err := g.SendBatch(zeros("w", 4, 2048), testTimeout); err != nil {
		h.fatalf("SendBatch: %v", err)
	}
	start := time.Now()
	g.Close() // no Finalize: the update is open
	if err := await(t, rx, "receiver"); err != nil {
		if !errors.Is(err, wsync.ErrAborted) && !errors.Is(err, wsync.ErrPeerFailed) {
			t.Fatalf("receiver: %v", err)
		}
		t.Logf("receiver got %v", err)
	} else if k := <-kind; k != wsync.EventClosed && k != wsync.EventAborted {
		t.Fatalf("receiver saw %s", k)
	} else {
		t.Logf("receiver saw %s", k)
	}
	if time.Since(start) > testTimeout/2 {
		t.Fatalf("the receiver took %v to notice", time.Since(start))
	}
}

// Closing a receiver in the middle of an update: the sender's next call fails naming the rank.
func TestCloseReceiverDuringAnUpdate(t *testing.T) {
	h := newHarness(t)
	closed := make(chan struct{})
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		defer close(closed)
		ev, err := r.Next(testTimeout)
		if err != nil {
			return err
		}
		if ev.Kind != wsync.EventBucket {
			return fmt.Errorf("first event %s", ev.Kind)
		}
		r.Close() // mid-update
		r.Close() // idempotent
		if _, err := r.Next(time.Second); !errors.Is(err, wsync.ErrInvalidState) {
			return fmt.Errorf("Next after Close: %v", err)
		}
		return nil
	})
	g := h.newGroup(1, wsync.Option{Key: "bucket_bytes", Value: "4096"})
	start := time.Now()
	err := g.SendBatch(zeros("a", 1, 512), testTimeout) // one bucket: the receiver's first event
	<-closed
	if err == nil {
		err = g.SendBatch(zeros("b", 8, 1024), testTimeout)
	}
	if err == nil {
		err = g.Finalize(1, testTimeout)
	}
	wantError(t, err, wsync.StatusPeerFailed, "rank 1")
	if time.Since(start) > testTimeout {
		t.Fatalf("noticed after %v", time.Since(start))
	}
	if err := g.Finalize(1, testTimeout); err == nil {
		t.Fatal("Finalize succeeded on a broken group")
	}
	if err := await(t, rx, "receiver"); err != nil {
		t.Fatal(err)
	}
}

// Abort from another goroutine stops a SendBatch blocked on a receiver that does not apply
// buckets, long before its timeout.
func TestAbortFromAnotherGoroutineStopsABlockedSend(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		if _, err := r.Next(testTimeout); err != nil { // the first bucket, then nothing
			return err
		}
		<-gate
		return nil
	})
	defer close(gate)
	g := h.newGroup(1, wsync.Option{Key: "bucket_bytes", Value: "4096"})
	go func() {
		time.Sleep(300 * time.Millisecond)
		g.Abort()
	}()
	start := time.Now()
	err := g.SendBatch(zeros("w", 8, 2048), 20*time.Second)
	if !errors.Is(err, wsync.ErrAborted) {
		h.fatalf("SendBatch: %v, want ErrAborted", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("SendBatch returned after %v", d)
	}
	g.Abort() // idempotent
	if _, err := g.SendStart(zeros("x", 1, 4), testTimeout); !errors.Is(err, wsync.ErrAborted) {
		t.Fatalf("SendStart after Abort: %v", err)
	}
	if _, err := g.Stats(); err != nil {
		t.Fatalf("Stats after Abort: %v", err)
	}
	g.Close()
	g.Abort() // after Close: a no-op
	_ = rx
}

// Abort may run concurrently with Close: the race detector and the library see no overlap.
func TestAbortConcurrentWithClose(t *testing.T) {
	h := newHarness(t)
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		_, err := untilEnd(r)
		return err
	})
	g := h.newGroup(1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					g.Abort()
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	g.Close()
	close(stop)
	wg.Wait()
	if err := await(t, rx, "receiver"); err != nil {
		t.Fatal(err)
	}
}

// A batch started with SendStart stays borrowed until a Wait says done; Wait maps the library's
// timeout to "not yet".
func TestSendStartWaitNotYetThenDone(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		<-gate // applies nothing until the sender saw "not yet"
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
	g := h.newGroup(1, wsync.Option{Key: "bucket_bytes", Value: "4096"})
	ts := zeros("w", 4, 2048)
	s, err := g.SendStart(ts, testTimeout)
	if err != nil {
		h.fatalf("SendStart: %v", err)
	}
	if done, err := s.Wait(50 * time.Millisecond); done || err != nil {
		h.fatalf("Wait with the receiver idle: %v, %v; want not yet", done, err)
	}
	if done, err := s.Done(); done || err != nil {
		h.fatalf("Done with the receiver idle: %v, %v; want not yet", done, err)
	}
	ts[0].Data.Free() // borrowed: the memory stays until the batch is done
	if ts[0].Data.Len() != 0 || !wsync.BufferAllocated(ts[0].Data) {
		t.Fatal("Free of a Buffer in flight released its memory, or it still reads as usable")
	}
	close(gate)
	if done, err := s.Wait(testTimeout); !done || err != nil {
		h.fatalf("Wait: %v, %v", done, err)
	}
	if wsync.BufferAllocated(ts[0].Data) {
		t.Fatal("the Buffer freed during the send was not released once the batch was delivered")
	}
	if !wsync.BufferAllocated(ts[1].Data) {
		t.Fatal("a Buffer not freed was released")
	}
	if done, err := s.Wait(0); !done || err != nil {
		t.Fatalf("Wait again: %v, %v", done, err)
	}
	if err := g.Finalize(1, testTimeout); err != nil {
		h.fatalf("Finalize: %v", err)
	}
	g.Close()
	if done, err := s.Wait(0); !done || err != nil {
		t.Fatalf("Wait for a delivered batch after Close: %v, %v", done, err)
	}
	if err := await(t, rx, "receiver"); err != nil {
		t.Fatal(err)
	}
}

// The timeout rule is C's: Next(NoWait) polls (ErrTimeout at once, the receiver still usable),
// Wait(NoWait) on a batch the receiver holds back answers "not yet" at once. Before 0.7.0 a zero
// timeout was the 60 s default in Go only.
func TestNoWaitPollsAsInC(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	polled := make(chan time.Duration, 1)
	rx := h.startReceiver(1, "gotest", func(r *wsync.Receiver) error {
		start := time.Now()
		if _, err := r.Next(wsync.NoWait); !errors.Is(err, wsync.ErrTimeout) {
			return fmt.Errorf("Next(NoWait) with nothing sent: %v, want ErrTimeout", err)
		}
		polled <- time.Since(start)
		<-gate
		_, err := untilEnd(r)
		return err
	})
	g := h.newGroup(1, wsync.Option{Key: "bucket_bytes", Value: "4096"})
	if took := <-polled; took > time.Second {
		t.Fatalf("Next(NoWait) blocked for %v", took)
	}
	s, err := g.SendStart(zeros("w", 4, 2048), wsync.DefaultTimeout)
	if err != nil {
		h.fatalf("SendStart: %v", err)
	}
	start := time.Now()
	if done, err := s.Wait(wsync.NoWait); done || err != nil {
		h.fatalf("Wait(NoWait) with the receiver idle: %v, %v; want not yet", done, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Wait(NoWait) blocked for %v", took)
	}
	close(gate)
	if done, err := s.Wait(wsync.DefaultTimeout); !done || err != nil {
		h.fatalf("Wait(DefaultTimeout): %v, %v", done, err)
	}
	g.Close()
	if err := await(t, rx, "receiver"); err != nil {
		t.Fatal(err)
	}
}
