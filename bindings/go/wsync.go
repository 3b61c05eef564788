// Package wsync is the Go binding of wsync, which moves freshly trained weights from an RL
// trainer (a Group, the sender) into running inference engines (Receivers).
//
// It is a thin cgo layer over the stable C ABI of wsync.h, found with pkg-config (package
// "wsync": an installed wsync, or a build tree's build/pkgconfig). A trainer creates a Group,
// sends the tensors of an update in batches (SendBatch, or SendStart and Send.Wait) and closes
// the update with Finalize; an engine worker creates a Receiver, optionally registers its
// parameter Buffers so bytes land in place, and loops on Next, committing each version.
//
// Memory: tensor data handed to wsync lives in C memory (a Buffer, from NewBuffer) or in device
// memory (Tensor.DevicePtr). Go slices cannot be handed to wsync, because cgo forbids C from
// keeping a Go pointer after a call returns, and both the asynchronous send and registered
// receiver buffers are used by wsync after the call that took them. Filling a Buffer in place
// (Buffer.Bytes, Buffer.Float32s, ...) costs nothing extra.
//
// Errors are *Error values carrying a Status and the library's message, read in the same C call
// that failed; errors.Is(err, wsync.ErrTimeout) and friends work.
//
// Threading: the methods of one Group or one Receiver are called from one goroutine at a time;
// Group.Abort may be called from any goroutine at any time, Close included. Package functions
// (Version, ABIVersion, SetLogCallback, Dtype and Status methods) are safe from any goroutine.
package wsync

/*
#cgo pkg-config: wsync
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
)

// UCX (the default transport) installs handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE when it
// loads, which turn Go's recoverable nil-dereference panics into crashes with a UCX backtrace.
// Unless the environment already says otherwise, tell UCX to leave those signals to Go. UCX reads
// the variable when the transport plugin loads, which is after this.
func init() {
	if _, set := os.LookupEnv("UCX_ERROR_SIGNALS"); !set {
		os.Setenv("UCX_ERROR_SIGNALS", "")
	}
}

// The ABI version of the wsync.h this binding was compiled against.
const (
	HeaderABIMajor = C.WSYNC_ABI_VERSION_MAJOR
	HeaderABIMinor = C.WSYNC_ABI_VERSION_MINOR
)

// MaxNdim is the largest number of dimensions of a tensor.
const MaxNdim = 8

// ABIVersion returns the ABI version (major, minor) of the libwsync actually loaded. NewGroup and
// NewReceiver refuse to work when its major differs from HeaderABIMajor or its minor is below 4.
func ABIVersion() (major, minor int) {
	v := uint32(C.wsync_abi_version())
	return int(v >> 16), int(v & 0xffff)
}

// Version returns the release of the libwsync loaded, e.g. "0.7.0".
func Version() string {
	return C.GoString(C.wsync_version_string())
}

// minABIMinor is the newest ABI minor whose functions the binding links: 1.4's
// wsync_receiver_get_state (Receiver.State). Against an older library the dynamic loader already
// refuses the program, naming the missing version node WSYNC_1.4 (docs/ABI.md, "Symbol versions");
// this check says the same for a library loaded some other way.
const minABIMinor = 4

// checkABI refuses a library whose ABI major is not the header's, or whose minor is older than
// minABIMinor.
func checkABI() error {
	major, minor := ABIVersion()
	if major != HeaderABIMajor || minor < minABIMinor {
		return &Error{Status: StatusVersionMismatch, Message: fmt.Sprintf(
			"the loaded libwsync %s has ABI %d.%d, but this binding needs ABI %d.%d or newer within major %d (wsync.h %d.%d)",
			Version(), major, minor, HeaderABIMajor, minABIMinor, HeaderABIMajor, HeaderABIMajor, HeaderABIMinor)}
	}
	return nil
}
