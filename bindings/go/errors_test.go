package wsync_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"wsync.dev/wsync"
)

func TestStatusNamesAndErrorsIs(t *testing.T) {
	all := []wsync.Status{wsync.StatusOK, wsync.ErrInvalidArgument, wsync.ErrNotFound, wsync.ErrVersionMismatch,
		wsync.ErrUnsupported, wsync.ErrTimeout, wsync.ErrAborted, wsync.ErrProtocol, wsync.ErrIO, wsync.ErrPeerFailed,
		wsync.ErrOutOfMemory, wsync.ErrInvalidState, wsync.ErrEngine, wsync.ErrInternal, wsync.ErrNoDevice,
		wsync.ErrRejected}
	for i, st := range all {
		if int(st) != i {
			t.Fatalf("status %s is %d, want %d (codes are pinned)", st.Name(), int(st), i)
		}
		if !strings.HasPrefix(st.Name(), "WSYNC_") || st.Name() == "WSYNC_ERR_UNKNOWN" || st.Doc() == "" {
			t.Fatalf("status %d: name %q, doc %q", i, st.Name(), st.Doc())
		}
	}
	if wsync.Status(len(all)).Name() != "WSYNC_ERR_UNKNOWN" {
		t.Fatalf("status %d has name %q: the header gained a code the binding lacks", len(all), wsync.Status(len(all)).Name())
	}
	if wsync.StatusPeerFailed.Name() != "WSYNC_ERR_PEER_FAILED" {
		t.Fatal(wsync.StatusPeerFailed.Name())
	}

	var err error = &wsync.Error{Status: wsync.StatusTimeout, Op: "wsync_group_send_batch", Message: "rank 2 did not answer"}
	wrapped := fmt.Errorf("publishing: %w", err)
	if !errors.Is(wrapped, wsync.ErrTimeout) || errors.Is(wrapped, wsync.ErrAborted) {
		t.Fatal("errors.Is does not match the status")
	}
	if !errors.Is(wrapped, &wsync.Error{Status: wsync.StatusTimeout}) {
		t.Fatal("errors.Is does not match an *Error of the same status")
	}
	var st wsync.Status
	if !errors.As(wrapped, &st) || st != wsync.StatusTimeout {
		t.Fatalf("errors.As found status %v", st)
	}
	if got := err.Error(); got != "wsync: wsync_group_send_batch: WSYNC_ERR_TIMEOUT: rank 2 did not answer" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestVersions(t *testing.T) {
	major, minor := wsync.ABIVersion()
	if major != wsync.HeaderABIMajor || minor < 0 {
		t.Fatalf("library ABI %d.%d, header %d.%d", major, minor, wsync.HeaderABIMajor, wsync.HeaderABIMinor)
	}
	if v := wsync.Version(); len(strings.Split(v, ".")) != 3 {
		t.Fatalf("Version() = %q", v)
	}
	if wsync.DtypeBfloat16.Size() != 2 || wsync.DtypeBfloat16.String() != "bfloat16" ||
		wsync.DtypeFloat8E4M3.String() != "float8_e4m3fn" || wsync.Dtype(99).Size() != 0 {
		t.Fatal("dtype sizes or names differ from the library's")
	}
}
