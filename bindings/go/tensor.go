package wsync

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math/bits"
	"strings"
	"unsafe"
)

// Dtype is an element type (WSYNC_DTYPE_*). The values are pinned forever.
type Dtype int32

// The element types of wsync.h.
const (
	DtypeInvalid    Dtype = 0
	DtypeBool       Dtype = 1
	DtypeInt8       Dtype = 2
	DtypeInt16      Dtype = 3
	DtypeInt32      Dtype = 4
	DtypeInt64      Dtype = 5
	DtypeUint8      Dtype = 6
	DtypeFloat16    Dtype = 7
	DtypeBfloat16   Dtype = 8
	DtypeFloat32    Dtype = 9
	DtypeFloat64    Dtype = 10
	DtypeFloat8E4M3 Dtype = 11 // e4m3fn
	DtypeFloat8E5M2 Dtype = 12
)

// Size returns the bytes per element, 0 for an unknown dtype.
func (d Dtype) Size() int { return int(C.wsync_dtype_size(C.int32_t(d))) }

// String returns torch's name of the dtype ("bfloat16", "float32", ...), "invalid" if unknown.
func (d Dtype) String() string { return C.GoString(C.wsync_dtype_name(C.int32_t(d))) }

// Tensor describes one dense, C-contiguous tensor handed to Group.SendBatch, Group.SendStart or
// Receiver.Register. Its bytes are either host memory in Data, whose Len must equal
// product(Shape) * Dtype.Size(), or CUDA device memory at DevicePtr on device DeviceIndex (the
// binding passes the pointer through; it is not tested without a GPU). An empty tensor (a 0 in
// Shape) needs neither. Go slices cannot be used: see Buffer.
type Tensor struct {
	Name        string  // unique within one update; UTF-8, 1..1024 bytes, no NUL
	Dtype       Dtype   //
	Shape       []int64 // at most MaxNdim dimensions, each >= 0; empty for a scalar
	Data        *Buffer // host memory, or nil with DevicePtr or for an empty tensor
	DevicePtr   uintptr // CUDA device memory (a CUdeviceptr); 0 for host memory
	DeviceIndex int     // the CUDA ordinal of DevicePtr in this process

	// Many senders (ABI 1.5): with FullShape set, this tensor is the box of a tensor of FullShape
	// that starts at Offset (one per dimension); Shape is the box's extent and Data its elements,
	// dense in C order. Replica: other senders hold the same box on purpose; it moves once, from
	// the lowest sender rank that holds it.
	FullShape []int64
	Offset    []int64
	Replica   bool
}

// markSlice sets the ABI 1.5 fields of c from t's FullShape, Offset and Replica.
func (t *Tensor) markSlice(op string, c *C.wsync_tensor_t) error {
	if t.FullShape == nil {
		if t.Offset != nil {
			return newError(StatusInvalidArgument, op, "tensor '%s' has an Offset but no FullShape", t.Name)
		}
		if t.Replica {
			c.flags = C.WSYNC_TENSOR_REPLICA
		}
		return nil
	}
	if len(t.FullShape) != len(t.Shape) || len(t.Offset) != len(t.Shape) {
		return newError(StatusInvalidArgument, op, "tensor '%s': a slice of %d dimensions needs a FullShape and an Offset of %d, got %d and %d",
			t.Name, len(t.Shape), len(t.Shape), len(t.FullShape), len(t.Offset))
	}
	for i := range t.Shape {
		if t.Offset[i] < 0 || t.Offset[i] > t.FullShape[i]-t.Shape[i] {
			return newError(StatusInvalidArgument, op, "tensor '%s': the slice at offset %v of extent %v does not fit in shape %v",
				t.Name, t.Offset, t.Shape, t.FullShape)
		}
	}
	if v := uint32(C.wsync_abi_version()); v&0xFFFF < 5 {
		return newError(StatusVersionMismatch, op, "tensor '%s': slices need libwsync ABI 1.5; the library loaded has ABI %d.%d",
			t.Name, v>>16, v&0xFFFF)
	}
	c.flags = C.WSYNC_TENSOR_SLICE
	if t.Replica {
		c.flags |= C.WSYNC_TENSOR_REPLICA
	}
	for j := range t.Shape {
		c.full_shape[j] = C.int64_t(t.FullShape[j])
		c.box_offset[j] = C.int64_t(t.Offset[j])
	}
	return nil
}

// nbytes checks the descriptor, whose Data holds `have` bytes, and returns
// product(Shape) * Dtype.Size().
func (t *Tensor) nbytes(op string, have uint64) (uint64, error) {
	if strings.IndexByte(t.Name, 0) >= 0 {
		return 0, newError(StatusInvalidArgument, op, "tensor name %q contains a NUL byte", t.Name)
	}
	if len(t.Shape) > MaxNdim {
		return 0, newError(StatusInvalidArgument, op, "tensor '%s' has %d dimensions, more than the %d allowed",
			t.Name, len(t.Shape), MaxNdim)
	}
	size := uint64(t.Dtype.Size())
	if size == 0 {
		return 0, newError(StatusInvalidArgument, op, "tensor '%s' has unknown dtype %d", t.Name, int32(t.Dtype))
	}
	n := size
	for i, d := range t.Shape {
		if d < 0 {
			return 0, newError(StatusInvalidArgument, op, "tensor '%s' has a negative dimension %d at index %d (shape %v)",
				t.Name, d, i, t.Shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 {
			return 0, newError(StatusInvalidArgument, op, "tensor '%s': shape %v of %s overflows 64 bits",
				t.Name, t.Shape, t.Dtype)
		}
		n = lo
	}
	if t.DevicePtr != 0 {
		if t.Data != nil {
			return 0, newError(StatusInvalidArgument, op, "tensor '%s' has both Data and DevicePtr", t.Name)
		}
		if t.DeviceIndex < 0 || t.DeviceIndex > 1023 {
			return 0, newError(StatusInvalidArgument, op, "tensor '%s' has DeviceIndex %d", t.Name, t.DeviceIndex)
		}
		return n, nil
	}
	if have != n {
		what := "no Data"
		if t.Data != nil {
			what = fmt.Sprintf("a Buffer of %d bytes", have)
		}
		return 0, newError(StatusInvalidArgument, op, "tensor '%s': shape %v of %s is %d bytes but it has %s",
			t.Name, t.Shape, t.Dtype, n, what)
	}
	return n, nil
}

// descs is a C array of tensor descriptors with their names, and the Buffers it points into,
// borrowed (pinned) once per use until unpinned.
type descs struct {
	arena
	ptr     *C.wsync_tensor_t
	n       int
	buffers []*Buffer
}

// buildDescs checks tensors and copies them into C memory, borrowing their Buffers. Free the C
// memory with d.free; return the borrows with unpinAll(d.buffers) once wsync is done with them.
func buildDescs(tensors []Tensor, op string) (*descs, error) {
	d := &descs{n: len(tensors)}
	if len(tensors) == 0 {
		return d, nil
	}
	d.ptr = C.wsgo_tensors_new(C.uint64_t(len(tensors)))
	if d.ptr == nil {
		return nil, newError(StatusOutOfMemory, op, "cannot allocate %d tensor descriptors", len(tensors))
	}
	d.keep(unsafe.Pointer(d.ptr))
	arr := cArray(d.ptr, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		var data unsafe.Pointer
		have := 0
		if t.Data != nil {
			var ok bool
			if data, have, ok = t.Data.borrow(); !ok {
				d.abandon()
				return nil, newError(StatusInvalidArgument, op, "tensor '%s': its Buffer was freed", t.Name)
			}
			d.buffers = append(d.buffers, t.Data)
		}
		nbytes, err := t.nbytes(op, uint64(have))
		if err != nil {
			d.abandon()
			return nil, err
		}
		c := &arr[i]
		c.dtype = C.int32_t(t.Dtype)
		c.name = d.str(t.Name)
		c.nbytes = C.uint64_t(nbytes)
		c.ndim = C.int32_t(len(t.Shape))
		for j, s := range t.Shape {
			c.shape[j] = C.int64_t(s)
		}
		if err := t.markSlice(op, c); err != nil {
			d.abandon()
			return nil, err
		}
		if t.DevicePtr != 0 {
			c.device_type = C.WSYNC_DEVICE_CUDA
			c.device_index = C.int32_t(t.DeviceIndex)
			C.wsgo_tensor_set_device_ptr(c, C.uintptr_t(t.DevicePtr))
		} else {
			c.device_type = C.WSYNC_DEVICE_CPU
			c.data = data
		}
	}
	return d, nil
}

// abandon frees the C memory and returns the borrows (a failed build).
func (d *descs) abandon() {
	d.free()
	unpinAll(d.buffers)
	d.buffers = nil
}

// cArray views n elements of a C array of descriptors.
func cArray(p *C.wsync_tensor_t, n int) []C.wsync_tensor_t {
	return unsafe.Slice(p, n)
}
