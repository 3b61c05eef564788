"""Arguments to the C calls: option dicts to wsync_option_t arrays, strings, timeouts, versions;
and the context-manager behaviour Group and Receiver share."""
from . import _ffi
from .errors import InvalidArgumentError


class Options:
    """A C array of wsync_option_t from {key: value} (values as str; bools as "1"/"0"), alive as
    long as this object."""

    def __init__(self, options):
        items = list((options or {}).items())
        self.count = len(items)
        self.array = (_ffi.Option * max(1, self.count))()
        self._keep = []
        for i, (k, v) in enumerate(items):
            if not isinstance(k, str):
                raise InvalidArgumentError("option keys are strings, got %r" % (k,))
            if isinstance(v, bool):
                v = "1" if v else "0"
            kb, vb = k.encode(), str(v).encode()
            self._keep += [kb, vb]
            o = self.array[i]
            o.struct_size, o.key, o.value = _ffi.STRUCT_SIZES[_ffi.Option], kb, vb

    def pointer(self):
        return self.array if self.count else None


def text(s):
    return None if s is None else s.encode()


def timeout(ms):
    """None = the default (-1: the group's or receiver's timeout_ms option)."""
    return -1 if ms is None else int(ms)


def version(v):
    """A weight version: an integer from 1 to 2^64 - 1 (ctypes would wrap a negative one)."""
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v < 1 << 64:
        raise InvalidArgumentError("version must be an integer from 1 to 2^64-1, got %r" % (v,))
    return v


class Closing:
    """close() on leaving a `with` block and when collected (subclasses set _handle first)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()
