package wsync_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"wsync.dev/wsync"
)

// logSomething makes the library log at info level: a group that waits briefly for a receiver
// that never comes (store listening, waiting for receivers), then gives up.
func logSomething(t *testing.T) {
	t.Helper()
	_, err := wsync.NewGroup(wsync.GroupConfig{NumReceivers: 1, GroupName: "logtest", Timeout: 200 * time.Millisecond})
	wantError(t, err, wsync.StatusTimeout)
}

func TestLogCallbackReceivesLinesAndSurvivesPanics(t *testing.T) {
	defer wsync.SetLogCallback(nil, wsync.LogWarn)

	var mu sync.Mutex
	var lines []string
	wsync.SetLogCallback(func(level wsync.LogLevel, msg string) {
		if level < wsync.LogError || level > wsync.LogInfo {
			msg = "BAD LEVEL " + level.String() + ": " + msg
		}
		mu.Lock()
		lines = append(lines, level.String()+": "+msg)
		mu.Unlock()
	}, wsync.LogInfo)
	logSomething(t)
	mu.Lock()
	got := strings.Join(lines, "\n")
	mu.Unlock()
	if !strings.Contains(got, "logtest") {
		t.Fatalf("the callback got no line naming the group:\n%s", got)
	}
	if strings.Contains(got, "BAD LEVEL") {
		t.Fatalf("a line above the max level arrived:\n%s", got)
	}

	// A panicking callback: recovered in the trampoline, the library and the test go on.
	var calls int32
	wsync.SetLogCallback(func(level wsync.LogLevel, msg string) {
		atomic.AddInt32(&calls, 1)
		panic("callback panics on " + msg)
	}, wsync.LogInfo)
	logSomething(t)
	if atomic.LoadInt32(&calls) == 0 {
		t.Fatal("the panicking callback was never called")
	}

	// Restoring the default sink: the previous callback is no longer called.
	wsync.SetLogCallback(nil, wsync.LogWarn)
	before := atomic.LoadInt32(&calls)
	logSomething(t)
	if atomic.LoadInt32(&calls) != before {
		t.Fatal("the callback was called after SetLogCallback(nil)")
	}
}
