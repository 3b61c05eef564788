package wsync_test

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"wsync.dev/wsync"
)

// A receiver process killed in the middle of an update: the sender gets StatusPeerFailed naming
// the rank, within its timeout. The receiver is the C++ sample engine, whose path the test runner
// sets in WSYNC_GO_TEST_ENGINE (tests/go/run.sh); without it the test is skipped.
func TestReceiverProcessKilledMidUpdate(t *testing.T) {
	engine := os.Getenv("WSYNC_GO_TEST_ENGINE")
	if engine == "" {
		t.Skip("WSYNC_GO_TEST_ENGINE (the path of wsync-sample-engine) is not set")
	}
	h := newHarness(t)
	var out lockedBuffer // the engine's output, for failures
	cmd := exec.Command(engine, "--rank", "1", "--store-file", h.addrFile, "--scale", "0.25")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", engine, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(testTimeout):
			t.Errorf("the engine did not exit")
		}
	}()

	const timeout = 8 * time.Second
	g, err := wsync.NewGroup(wsync.GroupConfig{NumReceivers: 1, GroupName: "demo", Timeout: testTimeout,
		Options: []wsync.Option{{Key: "store_addr_file", Value: h.addrFile}, {Key: "bucket_bytes", Value: "4096"},
			{Key: "timeout_ms", Value: "8000"}}})
	if err != nil {
		t.Fatalf("NewGroup: %v\nengine: %s", err, out.String())
	}
	defer g.Close()
	// Tensors the engine has not registered: it takes them as views (512 buckets).
	ts := zeros("victim.", 32, 16384)
	s, err := g.SendStart(ts, timeout)
	if err != nil {
		t.Fatalf("SendStart: %v", err)
	}
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(time.Millisecond) {
		st, err := g.Stats()
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		if st.Buckets >= 1 { // the engine acknowledged its first bucket
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no bucket was delivered in %v; engine: %s", testTimeout, out.String())
		}
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var done bool
	for err == nil && !done { // "not yet" until the failure is seen
		done, err = s.Wait(timeout)
	}
	if err == nil { // the whole batch made it before the kill: the next calls fail
		err = g.SendBatch(zeros("late.", 2, 16384), timeout)
	}
	if err == nil {
		err = g.Finalize(1, timeout)
	}
	wantError(t, err, wsync.StatusPeerFailed, "rank 1")
	if d := time.Since(start); d > timeout {
		t.Fatalf("the failure was reported after %v, more than the %v timeout", d, timeout)
	}
	t.Logf("after %v: %v", time.Since(start), err)
	if werr := <-exited; werr == nil {
		t.Fatal("the engine exited cleanly: it was not killed mid-update")
	}
	exited <- nil // for the deferred wait
}

// lockedBuffer collects a subprocess's output while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
