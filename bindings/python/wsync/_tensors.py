"""Tensors into wsync without copies: torch tensors (CPU and CUDA), numpy arrays, anything with
__dlpack__, and bytes-like objects (as uint8) are described to the C ABI by their own data pointer. Dense C-contiguous only: anything
else is refused with the tensor's name."""
import ctypes

from . import _ffi, boxes
from .errors import InvalidArgumentError



def _dtype_table():
    """The library's one dtype table (wsync.h's WSYNC_DTYPE_TABLE), read through wsync_dtype_name
    and wsync_dtype_size: {code: (torch's name, bytes per element)} for every valid code."""
    table, code = {}, 1
    while _ffi.lib.wsync_dtype_size(code) != 0:
        table[code] = (_ffi.lib.wsync_dtype_name(code).decode(), _ffi.lib.wsync_dtype_size(code))
        code += 1
    return table


# WSYNC_DTYPE_* by torch's dtype name (str(torch.float32) is "torch.float32"), and back; bytes per
# element by code.
_TABLE = _dtype_table()
DTYPES = {name: code for code, (name, _) in _TABLE.items()}
DTYPE_NAMES = {code: name for code, (name, _) in _TABLE.items()}
ITEMSIZE = {code: size for code, (_, size) in _TABLE.items()}
# numpy's names where they differ ("half" is float16's alias; ml_dtypes gives "bfloat16", "float8_e4m3fn").
NUMPY_NAMES = {"bool_": "bool"}
CPU, CUDA = 1, 2
# DLPack type codes: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12
DLPACK_DTYPES = {(0, 8): 2, (0, 16): 3, (0, 32): 4, (0, 64): 5, (1, 8): 6, (2, 16): 7, (4, 16): 8, (2, 32): 9,
                 (2, 64): 10, (6, 8): 1, (1, 1): 1, (10, 8): 11, (12, 8): 12}


def _refuse(name, why):
    raise InvalidArgumentError("tensor '%s': %s" % (name, why))


def _mark_slice(t, name, piece):
    """A Slice: the descriptor's shape is its extent; flags, full shape and offset say where it is."""
    if len(piece.full_shape) != t.ndim:
        _refuse(name, "a slice of %d dimensions of a tensor of %d" % (t.ndim, len(piece.full_shape)))
    t.flags = _ffi.TENSOR_SLICE | (_ffi.TENSOR_REPLICA if piece.replica else 0)
    for i, (d, o) in enumerate(zip(piece.full_shape, piece.box.offset)):
        t.full_shape[i] = int(d)
        t.box_offset[i] = int(o)


def _fill(t, name, dtype, data, shape, device_type, device_index):
    if len(shape) > _ffi.MAX_NDIM:
        _refuse(name, "%d dimensions; wsync takes at most %d" % (len(shape), _ffi.MAX_NDIM))
    t.dtype = dtype
    t.data = data or None
    n = 1
    for i, d in enumerate(shape):
        t.shape[i] = int(d)
        n *= int(d)
    t.ndim = len(shape)
    t.nbytes = n * ITEMSIZE[dtype]
    t.device_type = device_type
    t.device_index = device_index


_DTYPE_CACHE = {}  # a torch or numpy dtype object -> WSYNC_DTYPE_* (None: not one of them)


def _torch_dtype(dt):
    code = _DTYPE_CACHE.get(dt, 0)
    if code == 0:
        code = _DTYPE_CACHE[dt] = DTYPES.get(str(dt).replace("torch.", ""))
    return code


def _numpy_dtype(dt):
    code = _DTYPE_CACHE.get(dt, 0)
    if code == 0:
        c = DTYPES.get(NUMPY_NAMES.get(dt.name, dt.name))
        code = _DTYPE_CACHE[dt] = c if c is not None and dt.itemsize == ITEMSIZE[c] else None
    return code


def _from_torch(t, name, x, writable=False):
    dtype = _torch_dtype(x.dtype)
    if dtype is None:
        _refuse(name, "torch dtype %s has no wsync dtype" % x.dtype)
    if x.layout is not None and str(x.layout) != "torch.strided":
        _refuse(name, "layout %s; only dense (strided) tensors can be sent" % x.layout)
    if not x.is_contiguous():
        _refuse(name, "not contiguous (strides %s for shape %s); pass .contiguous()" % (tuple(x.stride()),
                                                                                       tuple(x.shape)))
    dev = x.device
    if dev.type == "cpu":
        dt, di = CPU, 0
    elif dev.type == "cuda":
        dt, di = CUDA, dev.index or 0
    else:
        _refuse(name, "device %s; wsync takes cpu and cuda tensors" % dev)
    _fill(t, name, dtype, x.data_ptr(), tuple(x.shape), dt, di)


def _from_numpy(t, name, x, writable=False):
    dtype = _numpy_dtype(x.dtype)
    if dtype is None:
        _refuse(name, "numpy dtype %s has no wsync dtype" % x.dtype)
    if x.dtype.byteorder not in ("=", "|"):
        _refuse(name, "numpy dtype %s is not in this machine's byte order; pass x.astype(x.dtype.newbyteorder('='))"
                % x.dtype.str)
    if writable and not x.flags["WRITEABLE"]:
        _refuse(name, "the array is read-only; a registered buffer is written into")
    if not x.flags["C_CONTIGUOUS"]:
        _refuse(name, "not C-contiguous (strides %s for shape %s); pass numpy.ascontiguousarray(x)" %
                (x.strides, x.shape))
    _fill(t, name, dtype, x.__array_interface__["data"][0], x.shape, CPU, 0)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(t, name, x, writable=False):
    """Any __dlpack__ producer. The capsule is kept (not consumed) for as long as the descriptor
    is used, so the producer's memory stays alive; its deleter runs when it is dropped."""
    try:
        capsule = x.__dlpack__()
    except (BufferError, RuntimeError, TypeError) as e:
        _refuse(name, "its __dlpack__ failed: %s" % e)
    ptr = _capsule_get(capsule, b"dltensor")  # DLManagedTensor starts with its DLTensor
    dl = _DLTensor.from_address(ptr)
    dtype = DLPACK_DTYPES.get((dl.dtype.code, dl.dtype.bits)) if dl.dtype.lanes == 1 else None
    if dtype is None:
        _refuse(name, "DLPack dtype (code %d, %d bits, %d lanes) has no wsync dtype" %
                (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes))
    shape = [dl.shape[i] for i in range(dl.ndim)]
    if dl.strides:
        expect = 1
        for i in reversed(range(dl.ndim)):
            if shape[i] != 1 and dl.strides[i] != expect:
                _refuse(name, "not C-contiguous (DLPack strides %s for shape %s)" %
                        ([dl.strides[j] for j in range(dl.ndim)], shape))
            expect *= shape[i]
    if dl.device.device_type == 1:
        dt, di = CPU, 0
    elif dl.device.device_type == 2:
        dt, di = CUDA, dl.device.device_id
    else:
        _refuse(name, "DLPack device type %d; wsync takes CPU (1) and CUDA (2)" % dl.device.device_type)
    _fill(t, name, dtype, (dl.data or 0) + dl.byte_offset, shape, dt, di)
    return capsule


def _from_buffer(t, name, x, writable=False):
    """A bytes-like object (bytearray, bytes, array.array, a memoryview of one): its bytes, as a
    1-D uint8 tensor. Lets a program with neither torch nor numpy move bytes (python -m wsync doctor)."""
    view = memoryview(x)
    if not view.c_contiguous:
        _refuse(name, "a %s that is not C-contiguous" % type(x).__name__)
    if view.readonly:
        if writable:
            _refuse(name, "a read-only %s; a registered buffer is written into" % type(x).__name__)
        if not isinstance(x, bytes):
            _refuse(name, "a read-only %s: pass bytes or a writable buffer" % type(x).__name__)
        keep = ctypes.c_char_p(x)  # points into the bytes object, which Descriptors keeps alive
        data = ctypes.cast(keep, ctypes.c_void_p).value
    else:
        keep = (ctypes.c_uint8 * view.nbytes).from_buffer(view.cast("B")) if view.nbytes else None
        data = ctypes.addressof(keep) if keep is not None else 0
    _fill(t, name, DTYPES["uint8"], data, (view.nbytes,), CPU, 0)
    return keep


_KIND_CACHE = {}  # type -> the function describing its instances


def _kind(x):
    kind = _KIND_CACHE.get(type(x), 0)
    if kind == 0:
        kind = _KIND_CACHE[type(x)] = _kind_of(x)
    return kind


def _kind_of(x):
    mod = type(x).__module__
    if mod.startswith("torch") and hasattr(x, "data_ptr") and hasattr(x, "is_contiguous"):
        return _from_torch
    if hasattr(x, "__array_interface__") and hasattr(x, "flags") and hasattr(x, "dtype"):
        return _from_numpy
    if hasattr(x, "__dlpack__"):
        return _from_dlpack
    if isinstance(x, (bytes, bytearray, memoryview)) or type(x).__module__ == "array":
        return _from_buffer
    return None


def named_items(tensors):
    """(name, tensor) pairs from a dict, a Module's named_parameters()/state_dict() or any iterable
    of pairs."""
    if hasattr(tensors, "items"):
        return list(tensors.items())
    items = list(tensors)
    for it in items:
        if not (isinstance(it, tuple) and len(it) == 2 and isinstance(it[0], str)):
            raise InvalidArgumentError("tensors: expected a dict or (name, tensor) pairs, got an item %r" %
                                       (type(it).__name__,))
    return items


def _named_array(tensors):
    """(the (name, x) pairs, a C array of as many wsync_tensor_t with struct_size and name set, the
    names' bytes, which must outlive the array's use)."""
    items = named_items(tensors)
    array = (_ffi.Tensor * max(1, len(items)))()
    names = []
    for i, (name, _) in enumerate(items):
        names.append(name.encode("utf-8"))
        array[i].struct_size = _ffi.STRUCT_SIZES[_ffi.Tensor]
        array[i].name = names[-1]
    return items, array, names


class Descriptors:
    """A C array of wsync_tensor_t over the caller's tensors, and everything that must outlive
    the C call that reads it: the name bytes, the tensors, DLPack capsules."""

    def __init__(self, tensors, writable=False):
        """writable: the buffers will be written into (registration): read-only ones are refused."""
        items, self.array, names = _named_array(tensors)
        self.count = len(items)
        self.keep = []
        for i, (name, x) in enumerate(items):
            t = self.array[i]
            piece = None
            if isinstance(x, boxes.Slice) or boxes.is_dtensor(x):
                piece = x if isinstance(x, boxes.Slice) else boxes.dtensor_slice(x)
                x = piece.local
            fill = _kind(x)
            if fill is None:
                _refuse(name, "a %s is neither a torch tensor, a numpy array, a bytes-like object nor has __dlpack__" %
                        type(x).__name__)
            extra = fill(t, name, x, writable)
            if piece is not None:
                _mark_slice(t, name, piece)
            self.keep.append((names[i], x, extra))

    def tensors(self):
        return self.array, self.count


def _declared_meta(name, x):
    """(dtype code, full shape) of one declared tensor: a torch tensor (any device, "meta" too), a
    numpy array, a Slice or DTensor (its full tensor), or a (dtype name, shape) pair."""
    if isinstance(x, boxes.Slice) or boxes.is_dtensor(x):
        piece = x if isinstance(x, boxes.Slice) else boxes.dtensor_slice(x)
        return _declared_meta(name, piece.local)[0], tuple(piece.full_shape)
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str):
        code = DTYPES.get(x[0].replace("torch.", ""))
        if code is None:
            _refuse(name, "dtype %r is not one of %s" % (x[0], ", ".join(sorted(DTYPES))))
        return code, tuple(int(d) for d in x[1])
    dt, shape = getattr(x, "dtype", None), getattr(x, "shape", None)
    if dt is None or shape is None:
        _refuse(name, "a %s has no dtype and shape (declare tensors, or (dtype name, shape) pairs)" % type(x).__name__)
    code = _numpy_dtype(dt) if hasattr(dt, "itemsize") and not str(dt).startswith("torch.") else _torch_dtype(dt)
    if code is None:
        _refuse(name, "dtype %s cannot be sent" % dt)
    return code, tuple(int(d) for d in shape)


class Declaration:
    """The C array of wsync_group_declare_update: names, dtypes and full shapes only (no data)."""

    def __init__(self, tensors):
        items, self.array, self.keep = _named_array(tensors)
        self.count = len(items)
        for i, (name, x) in enumerate(items):
            code, shape = _declared_meta(name, x)
            _fill(self.array[i], name, code, None, shape, 0, 0)
            self.array[i].nbytes = 0
