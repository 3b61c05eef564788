"""The C ABI of include/wsync.h, declared for ctypes: the library, its structs and a table of every
function's argument and return types. Nothing else in the package touches ctypes prototypes.

Which library is loaded, in order:
  1. WSYNC_LIBRARY=/path/to/libwsync.so.1: that file.
  2. WSYNC_USE_SYSTEM_LIBRARY=1: the installed libwsync.so.1 the dynamic loader finds (ldconfig,
     LD_LIBRARY_PATH), with its plugins in the wsync/ folder beside it.
  3. The libwsync the wheel carries (wsync/_lib/libwsync.so.1, plugins in wsync/_lib/wsync/).
For the portable wheel (scripts/wheel.sh: its _lib holds the file UCX_FROM_LIBUCX) PyPI's UCX,
the `libucx` package of its dependency libucx-cu12, is preloaded first, so that the ucx plugin's
libucp.so.0 is that one; not when a UCX is already in the process (the plugin then shares it),
and never for a source build (`pip install .`, WSYNC_LIBRARY, the system's library), whose plugin
was built against the system's UCX (an InfiniBand cluster's, with verbs).
"""
import ctypes
import os
import pathlib

ABI_MAJOR = 1  # the header this table was written against: include/wsync.h, ABI 1.4
ABI_MINOR = 5
MAX_NDIM = 8

c_status = ctypes.c_int32


def _struct_size(cls, last_field):
    """WSYNC_STRUCT_SIZE: the size up to and including the last field (PJRT style)."""
    f = getattr(cls, last_field)
    return f.offset + f.size


class Option(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class Tensor(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("dtype", ctypes.c_int32), ("name", ctypes.c_char_p),
                ("data", ctypes.c_void_p), ("nbytes", ctypes.c_uint64), ("ndim", ctypes.c_int32),
                ("device_type", ctypes.c_int32), ("device_index", ctypes.c_int32), ("reserved0", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_NDIM),
                # since ABI 1.5 (many senders)
                ("flags", ctypes.c_uint32), ("reserved1", ctypes.c_uint32),
                ("full_shape", ctypes.c_int64 * MAX_NDIM), ("box_offset", ctypes.c_int64 * MAX_NDIM)]


TENSOR_SLICE = 1
TENSOR_REPLICA = 2


class GroupConfig(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("num_receivers", ctypes.c_uint32),
                ("group_name", ctypes.c_char_p), ("store_addr", ctypes.c_char_p), ("transport", ctypes.c_char_p),
                ("adapter", ctypes.c_char_p), ("options", ctypes.POINTER(Option)), ("num_options", ctypes.c_uint64),
                ("timeout_ms", ctypes.c_int64)]


class GroupStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("num_receivers", ctypes.c_uint32),
                ("committed_version", ctypes.c_uint64), ("updates", ctypes.c_uint64), ("batches", ctypes.c_uint64),
                ("buckets", ctypes.c_uint64), ("tensors", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("staging_bytes", ctypes.c_uint64), ("send_seconds", ctypes.c_double),
                ("device_staging_bytes", ctypes.c_uint64), ("plans_computed", ctypes.c_uint64),
                ("members", ctypes.c_uint32), ("members_left", ctypes.c_uint32)]  # since ABI 1.5


class ReceiverConfig(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("rank", ctypes.c_uint32), ("store_addr", ctypes.c_char_p),
                ("group_name", ctypes.c_char_p), ("transport", ctypes.c_char_p),
                ("options", ctypes.POINTER(Option)), ("num_options", ctypes.c_uint64),
                ("timeout_ms", ctypes.c_int64)]


class ReceiverEvent(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32), ("version", ctypes.c_uint64),
                ("bucket_index", ctypes.c_uint64), ("num_tensors", ctypes.c_uint64),
                ("tensors", ctypes.POINTER(Tensor)), ("placed", ctypes.POINTER(ctypes.c_uint8)),
                ("bytes", ctypes.c_uint64)]


class ReceiverState(ctypes.Structure):  # since ABI 1.4
    _fields_ = [("struct_size", ctypes.c_uint32), ("receive_mode", ctypes.c_int32),
                ("committed_version", ctypes.c_uint64), ("pending_version", ctypes.c_uint64),
                ("buffers", ctypes.c_int32), ("late_writes", ctypes.c_int32), ("num_touched", ctypes.c_uint64),
                ("staged_bytes", ctypes.c_uint64),
                ("num_senders", ctypes.c_uint32), ("planned", ctypes.c_uint32),  # since ABI 1.5
                ("rank", ctypes.c_uint32), ("rank_assigned", ctypes.c_uint32)]  # since ABI 1.5


class MemberEvent(ctypes.Structure):  # since ABI 1.5
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32), ("rank", ctypes.c_uint32),
                ("status", c_status), ("update", ctypes.c_uint64), ("reason", ctypes.c_char_p)]


class PluginInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32), ("name", ctypes.c_char_p),
                ("path", ctypes.c_char_p), ("version", ctypes.c_char_p), ("detail", ctypes.c_char_p),
                ("error", ctypes.c_char_p), ("caps", ctypes.c_uint64), ("abi_major", ctypes.c_uint32),
                ("abi_minor", ctypes.c_uint32), ("status", c_status), ("shadowed", ctypes.c_uint32)]


STRUCT_SIZES = {
    Option: _struct_size(Option, "value"),
    Tensor: _struct_size(Tensor, "box_offset"),
    GroupConfig: _struct_size(GroupConfig, "timeout_ms"),
    GroupStats: _struct_size(GroupStats, "members_left"),
    ReceiverConfig: _struct_size(ReceiverConfig, "timeout_ms"),
    ReceiverEvent: _struct_size(ReceiverEvent, "bytes"),
    ReceiverState: _struct_size(ReceiverState, "rank_assigned"),
    PluginInfo: _struct_size(PluginInfo, "shadowed"),
    MemberEvent: _struct_size(MemberEvent, "reason"),
}


# Of a descriptor the library fills, this binding reads the fields up to `shape` (ABI 1.0's 112
# bytes): a 1.4 library's descriptors are as readable as 1.5's.
READ_SIZES = {Tensor: _struct_size(Tensor, "shape")}


def array_step(first, cls, what):
    """The step of an array the library filled (wsync.h: by its first element's struct_size,
    exactly; a multiple of 8, at least the fields this binding reads)."""
    size, reads = first.struct_size, READ_SIZES.get(cls, STRUCT_SIZES[cls])
    if size < reads or size % 8:
        from .errors import VersionMismatchError
        raise VersionMismatchError("%s of %d bytes: this binding reads %d and steps by a multiple of 8" %
                                   (what, size, reads))
    return size


def element(array, index, step, cls):
    """Element `index` of a C array of `cls` whose elements are `step` bytes apart."""
    return cls.from_address(ctypes.addressof(array.contents) + index * step)


def new(cls, **fields):
    """A struct with struct_size set, like the header's WSYNC_*_INIT."""
    s = cls(**fields)
    s.struct_size = STRUCT_SIZES[cls]
    return s


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)

_p = ctypes.POINTER
_vp = ctypes.c_void_p
# name: (return type, [argument types]); group and receiver handles are opaque pointers.
PROTOTYPES = {
    "wsync_abi_version": (ctypes.c_uint32, []),
    "wsync_version_string": (ctypes.c_char_p, []),
    "wsync_status_name": (ctypes.c_char_p, [c_status]),
    "wsync_status_doc": (ctypes.c_char_p, [c_status]),
    "wsync_last_error": (ctypes.c_char_p, []),
    "wsync_set_log_callback": (None, [LOG_FN, _vp, ctypes.c_int32]),
    "wsync_dtype_size": (ctypes.c_uint32, [ctypes.c_int32]),
    "wsync_dtype_name": (ctypes.c_char_p, [ctypes.c_int32]),
    "wsync_group_init": (c_status, [_p(GroupConfig), _p(_vp)]),
    "wsync_group_store_addr": (ctypes.c_char_p, [_vp]),
    "wsync_group_send_batch": (c_status, [_vp, _p(Tensor), ctypes.c_uint64, ctypes.c_int64]),
    "wsync_group_send_start": (c_status, [_vp, _p(Tensor), ctypes.c_uint64, ctypes.c_int64, _p(ctypes.c_uint64)]),
    "wsync_group_send_wait": (c_status, [_vp, ctypes.c_uint64, ctypes.c_int64]),
    "wsync_group_set_cuda_stream": (c_status, [_vp, _vp]),
    "wsync_group_finalize": (c_status, [_vp, ctypes.c_uint64, ctypes.c_int64]),
    "wsync_group_declare_update": (c_status, [_vp, _p(Tensor), ctypes.c_uint64]),
    "wsync_group_abort": (None, [_vp]),
    "wsync_group_get_stats": (c_status, [_vp, _p(GroupStats)]),
    "wsync_group_next_member_event": (c_status, [_vp, _p(MemberEvent)]),
    "wsync_group_members": (c_status, [_vp, _p(ctypes.c_uint32), ctypes.c_uint64, _p(ctypes.c_uint64)]),
    "wsync_group_destroy": (None, [_vp]),
    "wsync_receiver_init": (c_status, [_p(ReceiverConfig), _p(_vp)]),
    "wsync_receiver_register": (c_status, [_vp, _p(Tensor), ctypes.c_uint64]),
    "wsync_receiver_next": (c_status, [_vp, _p(ReceiverEvent), ctypes.c_int64]),
    "wsync_receiver_commit": (c_status, [_vp, ctypes.c_uint64]),
    "wsync_receiver_committed_version": (ctypes.c_uint64, [_vp]),
    "wsync_receiver_get_state": (c_status, [_vp, _p(ReceiverState)]),
    "wsync_receiver_touched_name": (ctypes.c_char_p, [_vp, ctypes.c_uint64]),
    "wsync_receiver_destroy": (None, [_vp]),
    "wsync_plugin_dirs": (ctypes.c_char_p, []),
    "wsync_list_plugins": (c_status, [_p(PluginInfo), ctypes.c_uint64, _p(ctypes.c_uint64)]),
}


class LibraryNotFound(ImportError):
    pass


def _library_path():
    explicit = os.environ.get("WSYNC_LIBRARY")
    if explicit:
        return explicit
    if os.environ.get("WSYNC_USE_SYSTEM_LIBRARY", "0") not in ("", "0"):
        return "libwsync.so.%d" % ABI_MAJOR
    bundled = pathlib.Path(__file__).resolve().parent / "_lib" / ("libwsync.so.%d" % ABI_MAJOR)
    if bundled.exists():
        return str(bundled)
    raise LibraryNotFound(
        "wsync: no libwsync.so.%d next to the package (%s). Install the wheel (pip install <wsync checkout>), "
        "or point WSYNC_LIBRARY at a built libwsync.so.%d, or set WSYNC_USE_SYSTEM_LIBRARY=1 to use the "
        "installed one" % (ABI_MAJOR, bundled.parent, ABI_MAJOR))


def _ucx_loaded():
    try:
        with open("/proc/self/maps") as f:
            return any("/libucp.so" in line for line in f)
    except OSError:
        return False


def _preload_ucx(path):
    """For the portable wheel's library at `path`: load PyPI's UCX (libucx-cu12) unless a UCX is
    loaded already. Returns why it failed, or None."""
    if not (pathlib.Path(path).parent / "UCX_FROM_LIBUCX").exists() or _ucx_loaded():
        return None
    try:
        import libucx  # noqa: PLC0415 (optional: the portable wheel's dependency)
    except ImportError:
        return "the portable wheel needs the package libucx-cu12 (pip install libucx-cu12)"
    try:
        libucx.load_library()
    except OSError as e:  # the ucx plugin then says why it does not load (python -m wsync doctor)
        return "libucx.load_library() failed: %s" % e
    return None


def _load():
    global ucx_preload_error
    path = _library_path()
    ucx_preload_error = _preload_ucx(path)
    try:
        lib = ctypes.CDLL(path)  # CDLL: the GIL is released during every call
    except OSError as e:
        raise LibraryNotFound("wsync: cannot load %s: %s" % (path, e)) from e
    lib.wsync_abi_version.restype = ctypes.c_uint32
    version = lib.wsync_abi_version()
    if version >> 16 != ABI_MAJOR or (version & 0xFFFF) < ABI_MINOR:
        raise LibraryNotFound("wsync: %s has ABI %d.%d; this package needs %d.%d or a later 1.x" % (
            path, version >> 16, version & 0xFFFF, ABI_MAJOR, ABI_MINOR))
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib, path


ucx_preload_error = None  # why PyPI's UCX did not preload (python -m wsync doctor shows it)
lib, library_path = _load()
