package wsync_test

import (
	"errors"
	"fmt"
	"hash/crc64"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"wsync.dev/wsync"
)

// Every wait in the tests is bounded by this (receivers, groups, calls).
const testTimeout = 10 * time.Second

// harness runs one group and its in-process receivers, which find the group's store through
// the store_addr_file option (the port is 0, so it is known only once the group bound it).
type harness struct {
	t         *testing.T
	addrFile  string
	receivers []<-chan error // results of startReceiver, reported with a failure of the sender
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, addrFile: filepath.Join(t.TempDir(), "store")}
}

// options returns the group options every test group uses, then extra.
func (h *harness) options(extra ...wsync.Option) []wsync.Option {
	return append([]wsync.Option{
		{Key: "store_addr_file", Value: h.addrFile},
		{Key: "timeout_ms", Value: "10000"},
	}, extra...)
}

// newGroup creates a group of n receivers named "gotest" and closes it at the end of the test.
func (h *harness) newGroup(n int, extra ...wsync.Option) *wsync.Group {
	h.t.Helper()
	g, err := wsync.NewGroup(wsync.GroupConfig{
		NumReceivers: n, GroupName: "gotest", StoreAddr: "127.0.0.1:0",
		Options: h.options(extra...), Timeout: testTimeout,
	})
	if err != nil {
		h.t.Fatalf("NewGroup: %v", err)
	}
	h.t.Cleanup(g.Close)
	if !strings.HasPrefix(g.StoreAddr(), "127.0.0.1:") || strings.HasSuffix(g.StoreAddr(), ":0") {
		h.t.Fatalf("StoreAddr() = %q, want 127.0.0.1 and the port bound", g.StoreAddr())
	}
	return g
}

// readAddr polls the store_addr_file until the group wrote it.
func (h *harness) readAddr() (string, error) {
	deadline := time.Now().Add(testTimeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(h.addrFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return strings.TrimSpace(string(b)), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "", errors.New("the group never wrote its store address to " + h.addrFile)
}

// startReceiver joins the group as `rank` (group name `group`) in a goroutine, runs fn on the
// receiver and closes it; the channel gets what fn (or joining) returned.
func (h *harness) startReceiver(rank int, group string, fn func(r *wsync.Receiver) error) <-chan error {
	ch := make(chan error, 1)
	go func() {
		addr, err := h.readAddr()
		if err != nil {
			ch <- err
			return
		}
		r, err := wsync.NewReceiver(wsync.ReceiverConfig{Rank: rank, StoreAddr: addr, GroupName: group, Timeout: testTimeout})
		if err != nil {
			ch <- err
			return
		}
		err = fn(r)
		r.Close() // before reporting: the test may check what Close released
		ch <- err
	}()
	h.receivers = append(h.receivers, ch)
	return ch
}

// fatalf fails the test with what the sender saw and what the receivers reported (waiting at
// most a second for them).
func (h *harness) fatalf(format string, args ...interface{}) {
	h.t.Helper()
	msg := fmt.Sprintf(format, args...)
	deadline := time.After(time.Second)
	for i, ch := range h.receivers {
		select {
		case err := <-ch:
			msg += fmt.Sprintf("\n  receiver %d: %v", i+1, err)
		case <-deadline:
			msg += fmt.Sprintf("\n  receiver %d: still running", i+1)
		}
	}
	h.t.Fatal(msg)
}

// await returns what a receiver goroutine reported, failing the test if it does not report in time.
func await(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(2 * testTimeout):
		t.Fatalf("%s did not finish within %v", what, 2*testTimeout)
		return nil
	}
}

// wantError fails unless err is an *wsync.Error of status st whose message contains every substr.
func wantError(t *testing.T, err error, st wsync.Status, substr ...string) *wsync.Error {
	t.Helper()
	var e *wsync.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want a *wsync.Error with %s", err, err, st.Name())
	}
	if e.Status != st || !errors.Is(err, st) {
		t.Fatalf("got %v, want status %s", err, st.Name())
	}
	for _, s := range substr {
		if !strings.Contains(e.Message, s) {
			t.Fatalf("message %q does not name %q", e.Message, s)
		}
	}
	return e
}

// tensorSpec is one tensor of a test model.
type tensorSpec struct {
	name  string
	dtype wsync.Dtype
	shape []int64
}

func (s tensorSpec) nbytes() int {
	n := s.dtype.Size()
	for _, d := range s.shape {
		n *= int(d)
	}
	return n
}

// fill writes the bytes of tensor `name` at `version`: a pure function of both.
func fill(name string, version uint64, dst []byte) {
	h := fnv.New64a()
	h.Write([]byte(name))
	x := h.Sum64() ^ (version * 0x9E3779B97F4A7C15)
	for i := range dst {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		dst[i] = byte(x)
	}
}

var crcTable = crc64.MakeTable(crc64.ECMA)

func checksum(b []byte) uint64 { return crc64.Checksum(b, crcTable) }

// expected returns the checksum of what fill writes.
func expected(s tensorSpec, version uint64) uint64 {
	b := make([]byte, s.nbytes())
	fill(s.name, version, b)
	return checksum(b)
}

// zeros returns n float32 tensors of `elems` elements each, named prefix0, prefix1, ...
func zeros(prefix string, n, elems int) []wsync.Tensor {
	ts := make([]wsync.Tensor, n)
	for i := range ts {
		ts[i] = wsync.Tensor{Name: prefix + strconv.Itoa(i), Dtype: wsync.DtypeFloat32, Shape: []int64{int64(elems)},
			Data: wsync.NewBuffer(4 * elems)}
	}
	return ts
}
