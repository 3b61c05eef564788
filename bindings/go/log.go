package wsync

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/cgo"
	"sync"
)

// LogLevel is the level of a log line (WSYNC_LOG_*): lower is more severe.
type LogLevel int32

// The log levels of wsync.h.
const (
	LogError LogLevel = 1
	LogWarn  LogLevel = 2
	LogInfo  LogLevel = 3
	LogDebug LogLevel = 4
	LogTrace LogLevel = 5
)

// String returns "error", "warn", "info", "debug" or "trace".
func (l LogLevel) String() string {
	switch l {
	case LogError:
		return "error"
	case LogWarn:
		return "warn"
	case LogInfo:
		return "info"
	case LogDebug:
		return "debug"
	case LogTrace:
		return "trace"
	}
	return fmt.Sprintf("level(%d)", int32(l))
}

// LogFunc receives one formatted log line of the library or a plugin (no trailing newline).
type LogFunc func(level LogLevel, msg string)

var (
	logMu     sync.Mutex
	logHandle cgo.Handle // the current callback's, 0 for the default sink
)

// SetLogCallback routes every library and plugin log line with a level <= maxLevel to fn.
// fn may be called from any wsync thread, concurrently, so it must be safe for that; a panic in
// fn is recovered (and reported on stderr), never unwinding into the library. fn == nil restores
// the default sink, stderr: up to maxLevel when it is LogError..LogTrace, else (0) as the
// environment variable WSYNC_LOG_LEVEL says (error|warn|info|debug|trace; default warn). When SetLogCallback
// returns, calls of the previous callback in progress have returned (the library waits up to
// 2 s for them). Safe from any goroutine.
func SetLogCallback(fn LogFunc, maxLevel LogLevel) {
	logMu.Lock()
	defer logMu.Unlock()
	var h cgo.Handle
	if fn != nil {
		h = cgo.NewHandle(fn)
	}
	C.wsgo_set_log_callback(C.uintptr_t(h), C.int32_t(maxLevel))
	// Only now may the previous handle go: the library no longer calls through it.
	if logHandle != 0 {
		logHandle.Delete()
	}
	logHandle = h
}

// wsgoLog is the exported trampoline the C shim's wsgo_log_trampoline calls: it finds the Go
// function behind the handle and calls it, recovering any panic.
//
//export wsgoLog
func wsgoLog(h C.uintptr_t, level C.int32_t, msg *C.char) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "wsync: the log callback panicked (recovered): %v\n", r)
		}
	}()
	fn, ok := cgo.Handle(h).Value().(LogFunc)
	if !ok || fn == nil {
		return
	}
	fn(LogLevel(level), C.GoString(msg))
}
