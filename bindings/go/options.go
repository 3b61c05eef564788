package wsync

/*
#include "shim.h"
*/
import "C"

import (
	"strings"
	"time"
	"unsafe"
)

// Option is one string knob, e.g. {"bucket_bytes", "268435456"}: the group options of wsync.h
// (bucket_bytes, staging_buckets, timeout_ms, verify_payload, store_addr_file, ...) and
// "transport.*" / "adapter.*" keys passed to the plugins. The call that takes them validates them;
// an unknown key is refused with StatusInvalidArgument naming the key. Options are passed in the
// order given.
type Option struct {
	Key, Value string
}

// buildOptions copies opts into a C array owned by a (NULL when empty).
func buildOptions(a *arena, opts []Option, op string) (*C.wsync_option_t, C.uint64_t, error) {
	if len(opts) == 0 {
		return nil, 0, nil
	}
	for _, o := range opts {
		if strings.IndexByte(o.Key, 0) >= 0 || strings.IndexByte(o.Value, 0) >= 0 {
			return nil, 0, newError(StatusInvalidArgument, op, "option %q contains a NUL byte in its key or value", o.Key)
		}
	}
	arr := C.wsgo_options_new(C.uint64_t(len(opts)))
	if arr == nil {
		return nil, 0, newError(StatusOutOfMemory, op, "cannot allocate %d options", len(opts))
	}
	a.keep(unsafe.Pointer(arr))
	s := unsafe.Slice(arr, len(opts))
	for i, o := range opts {
		s[i].key = a.str(o.Key)
		s[i].value = a.str(o.Value)
	}
	return arr, C.uint64_t(len(opts)), nil
}

// cString checks that a config field has no NUL and copies it (NULL for "", the default).
func cString(a *arena, s, field, op string) (*C.char, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, newError(StatusInvalidArgument, op, "%s %q contains a NUL byte", field, s)
	}
	return a.strOrNull(s), nil
}

// The timeout rule of wsync.h, the same in every binding: DefaultTimeout (any negative duration)
// is the group's or receiver's "timeout_ms" option (60 s unless set); NoWait (0) asks the call not
// to block (Receiver.Next and Send.Wait answer "not yet" at once, SendStart and SendBatch do not
// wait for room in a full pipeline; a wait for a receiver's answer cannot be skipped, so inside
// SendBatch and Finalize it takes the default); a positive duration is a bound, rounded up to whole milliseconds. In a GroupConfig
// or ReceiverConfig, 0 is the default too (the zero value works).
const (
	DefaultTimeout time.Duration = -1
	NoWait         time.Duration = 0
)

// timeoutMS converts a timeout by the rule above: negative to -1 (WSYNC_TIMEOUT_DEFAULT), 0 to 0
// (WSYNC_TIMEOUT_NO_WAIT), a positive one rounded up so that it never becomes "do not block".
func timeoutMS(d time.Duration) C.int64_t {
	if d < 0 {
		return C.int64_t(C.WSYNC_TIMEOUT_DEFAULT)
	}
	return C.int64_t((d + time.Millisecond - 1) / time.Millisecond)
}
