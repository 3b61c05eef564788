"""One exception class per wsync status. Each carries the status (number and name) and the detail
wsync_last_error() gave right after the failing call, on the thread that made it."""
import builtins

from ._ffi import lib


class WsyncError(Exception):
    """Base of every error wsync raises. `status` is the C status code, `status_name` its name
    ("WSYNC_ERR_TIMEOUT"), `message` the library's detail naming the rank, tensor, key or URL."""

    status = -1

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.status_name = lib.wsync_status_name(self.status).decode()
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message) if message else self.status_name)


class InvalidArgumentError(WsyncError, ValueError):
    status = 1


class NotFoundError(WsyncError, LookupError):
    status = 2


class VersionMismatchError(WsyncError):
    status = 3


class UnsupportedError(WsyncError):
    status = 4


class TimeoutError(WsyncError, builtins.TimeoutError):  # noqa: A001 - wsync.TimeoutError, like asyncio's
    status = 5


class AbortedError(WsyncError):
    status = 6


class ProtocolError(WsyncError):
    status = 7


class IOError(WsyncError):  # noqa: A001 - WSYNC_ERR_IO
    status = 8


class PeerFailedError(WsyncError):
    status = 9


class OutOfMemoryError(WsyncError, MemoryError):
    status = 10


class InvalidStateError(WsyncError):
    status = 11


class EngineError(WsyncError):
    status = 12


class InternalError(WsyncError):
    status = 13


class NoDeviceError(WsyncError):
    status = 14


class RejectedError(WsyncError):
    status = 15


BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, NotFoundError, VersionMismatchError, UnsupportedError, TimeoutError, AbortedError,
    ProtocolError, IOError, PeerFailedError, OutOfMemoryError, InvalidStateError, EngineError, InternalError,
    NoDeviceError, RejectedError)}


def error_for(status, message):
    """The exception for a status (a WsyncError carrying the number for a code this package does
    not know, e.g. from a newer library)."""
    cls = BY_STATUS.get(status)
    return cls(message) if cls is not None else WsyncError(message, status)


def check(status):
    """Raise the status' exception with wsync_last_error(). Call it right after the C call, with
    nothing in between that could call into wsync on this thread."""
    if status != 0:
        raise error_for(status, lib.wsync_last_error().decode("utf-8", "replace"))
