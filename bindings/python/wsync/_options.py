"""Option dicts to wsync_option_t arrays."""
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
