"""wsync for Python: publish a trainer's weights into running inference engines.

Pure Python over wsync's C ABI (ctypes); the wheel carries libwsync and its plugins. See
docs/PYTHON.md."""
import ctypes

from . import _ffi
from ._ffi import lib, library_path
from ._log import restore_default_logging, route_logs
from .errors import (AbortedError, EngineError, InternalError, InvalidArgumentError, InvalidStateError, IOError,
                     NoDeviceError, NotFoundError, OutOfMemoryError, PeerFailedError, ProtocolError, RejectedError,
                     TimeoutError, UnsupportedError, VersionMismatchError, WsyncError, check)
from .boxes import Slice
from .group import Group, GroupStats, MemberEvent, SendHandle
from .receiver import Buffers, Event, EventKind, ReceiveMode, Receiver, ReceiverState, TensorView

__version__ = lib.wsync_version_string().decode()

# The timeout rule of wsync.h, the same in every binding (a timeout_ms argument): TIMEOUT_DEFAULT
# (None, or any negative number) is the group's or receiver's timeout_ms option, 60000 unless set;
# NO_WAIT (0) asks the call not to block: next() and SendHandle.wait() answer "not yet" at once,
# send_async() and send() do not wait for room in a full pipeline; a wait for a receiver's answer
# cannot be skipped, so inside send() and finalize() it takes the default.
TIMEOUT_DEFAULT = None
NO_WAIT = 0


def abi_version():
    """(major, minor) of the loaded libwsync."""
    v = lib.wsync_abi_version()
    return v >> 16, v & 0xFFFF


def status_name(status):
    return lib.wsync_status_name(status).decode()


def plugin_dirs():
    return [d for d in lib.wsync_plugin_dirs().decode().split(":") if d]


def list_plugins():
    """Every transport and adapter plugin wsync can find, as dicts (what wsync-info prints)."""
    count = ctypes.c_uint64()
    check(lib.wsync_list_plugins(None, 0, ctypes.byref(count)))
    n = count.value
    arr = (_ffi.PluginInfo * max(1, n))()
    arr[0].struct_size = ctypes.sizeof(_ffi.PluginInfo)
    check(lib.wsync_list_plugins(arr, n, ctypes.byref(count)))
    kinds = {1: "transport", 2: "adapter"}
    out = []
    for p in arr[:min(n, count.value)]:
        out.append({"kind": kinds.get(p.kind, str(p.kind)), "name": p.name.decode(), "path": p.path.decode(),
                    "version": p.version.decode(), "detail": p.detail.decode(), "error": p.error.decode(),
                    "status": status_name(p.status), "abi": (p.abi_major, p.abi_minor), "shadowed": bool(p.shadowed)})
    return out


def info():
    """What this wsync is, as one dict (what `python -m wsync info` and wsync-info print): version,
    abi, library, plugin_dirs, plugins (list_plugins())."""
    major, minor = abi_version()
    return {"version": __version__, "abi": "%d.%d" % (major, minor), "library": str(library_path),
            "plugin_dirs": plugin_dirs(), "plugins": list_plugins()}


route_logs()

# TimeoutError and IOError are left out: `from wsync import *` must not shadow the builtins (use
# wsync.TimeoutError, wsync.IOError).
__all__ = ["Group", "Slice", "GroupStats", "MemberEvent", "SendHandle", "Receiver", "ReceiverState", "ReceiveMode", "Buffers", "Event",
           "EventKind", "TensorView", "WsyncError",
           "InvalidArgumentError", "NotFoundError", "VersionMismatchError", "UnsupportedError",
           "AbortedError", "ProtocolError", "PeerFailedError", "OutOfMemoryError", "InvalidStateError",
           "EngineError", "InternalError", "NoDeviceError", "RejectedError", "abi_version", "status_name",
           "plugin_dirs", "list_plugins", "info", "route_logs", "restore_default_logging", "library_path",
           "TIMEOUT_DEFAULT", "NO_WAIT"]
