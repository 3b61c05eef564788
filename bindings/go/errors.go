package wsync

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Status is a wsync status code (WSYNC_OK, WSYNC_ERR_*). The codes are pinned forever.
//
// Status implements error so that the sentinels ErrTimeout, ErrAborted, ... can be matched with
// errors.Is against the *Error values this package returns.
type Status int32

// The status codes of wsync.h.
const (
	StatusOK              Status = 0
	StatusInvalidArgument Status = 1  // a bad argument, option value or struct_size
	StatusNotFound        Status = 2  // a plugin file, a symbol, a key, a tensor name
	StatusVersionMismatch Status = 3  // a plugin, peer or library speaks another version
	StatusUnsupported     Status = 4  // the plugin or transport cannot do what was asked
	StatusTimeout         Status = 5  // a deadline passed
	StatusAborted         Status = 6  // Group.Abort, or the peer aborted
	StatusProtocol        Status = 7  // malformed or corrupted data from the wire
	StatusIO              Status = 8  // a socket, file or transport operation failed
	StatusPeerFailed      Status = 9  // a peer process died or closed its connection
	StatusOutOfMemory     Status = 10 // an allocation failed
	StatusInvalidState    Status = 11 // the call is not allowed now
	StatusEngine          Status = 12 // the inference engine refused the request
	StatusInternal        Status = 13 // a bug in wsync or a plugin
	StatusNoDevice        Status = 14 // no CUDA device where one is needed
	StatusRejected        Status = 15 // the group refused a receiver (wrong group, rank)
	statusCount           Status = 16
)

// Sentinels for errors.Is: errors.Is(err, ErrTimeout) is true when err is an *Error with
// StatusTimeout.
const (
	ErrInvalidArgument = StatusInvalidArgument
	ErrNotFound        = StatusNotFound
	ErrVersionMismatch = StatusVersionMismatch
	ErrUnsupported     = StatusUnsupported
	ErrTimeout         = StatusTimeout
	ErrAborted         = StatusAborted
	ErrProtocol        = StatusProtocol
	ErrIO              = StatusIO
	ErrPeerFailed      = StatusPeerFailed
	ErrOutOfMemory     = StatusOutOfMemory
	ErrInvalidState    = StatusInvalidState
	ErrEngine          = StatusEngine
	ErrInternal        = StatusInternal
	ErrNoDevice        = StatusNoDevice
	ErrRejected        = StatusRejected
)

// Name returns the status's name in wsync.h, e.g. "WSYNC_ERR_TIMEOUT" ("WSYNC_ERR_UNKNOWN" for a
// value that is not a code).
func (s Status) Name() string { return C.GoString(C.wsync_status_name(C.wsync_status_t(s))) }

// Doc returns a one-line description of the status code.
func (s Status) Doc() string { return C.GoString(C.wsync_status_doc(C.wsync_status_t(s))) }

// Error returns Name, so that a Status can serve as a sentinel error.
func (s Status) Error() string { return s.Name() }

// String returns Name.
func (s Status) String() string { return s.Name() }

// Error is a failed wsync call: the status and the detail the library gave (naming the key,
// tensor, rank or file at fault), or the binding's own message for arguments it refused before
// calling the library.
type Error struct {
	Status  Status
	Op      string // the C call that failed (or was refused), e.g. "wsync_group_send_batch"
	Message string
}

// Error formats the error as "wsync: OP: STATUS_NAME: message".
func (e *Error) Error() string {
	s := "wsync: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += e.Status.Name()
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is this error's Status (the sentinels ErrTimeout, ...) or an *Error
// with the same Status.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return e.Status == t
	case *Error:
		return t != nil && e.Status == t.Status
	}
	return false
}

// Unwrap returns the Status, so that errors.As(err, &status) finds it.
func (e *Error) Unwrap() error { return e.Status }

// newError makes an *Error of the binding's own (no library call failed).
func newError(st Status, op, format string, args ...interface{}) *Error {
	return &Error{Status: st, Op: op, Message: fmt.Sprintf(format, args...)}
}

// check turns a shim's result into nil or an *Error, freeing the copied message.
func check(r C.wsgo_status, op string) error {
	if r.message != nil {
		defer C.free(unsafe.Pointer(r.message))
	}
	if r.status == C.WSYNC_OK {
		return nil
	}
	e := &Error{Status: Status(r.status), Op: op}
	if r.message != nil {
		e.Message = C.GoString(r.message)
	}
	return e
}
