package wsync

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Buffer is host memory allocated with C's calloc, the memory tensor data must live in.
//
// Why not a Go slice: cgo's pointer rules forbid C from keeping a Go pointer once a call returns,
// and wsync does keep tensor memory beyond calls: Group.SendStart borrows it until the batch is
// delivered, and Receiver.Register until the receiver is closed. A Buffer's memory is outside the
// Go heap, so the garbage collector neither moves nor frees it behind wsync's back. Fill it in
// place through Bytes or a typed view (Float32s, ...): that costs nothing extra. Copying a Go
// slice in (copy(b.Bytes(), s)) costs one copy.
//
// Lifetime: Free releases the memory. There is no finalizer: the slices from Bytes and the typed
// views do not keep the Buffer reachable, so a finalizer could free memory a view still uses; a
// Buffer never freed is leaked. While a Group or Receiver borrows the Buffer (an unfinished
// SendStart batch, a registration), it holds a reference, and Free only marks it: the memory is
// released when the last borrow ends. Slices obtained from Bytes and the typed views must not be
// used after Free.
//
// A Buffer may be used from several goroutines; writing its bytes while wsync reads them (a batch
// in flight) or writes them (a registered buffer during an update) is a data race.
type Buffer struct {
	mu    sync.Mutex
	p     unsafe.Pointer
	n     int
	pins  int  // borrows by groups and receivers
	freed bool // Free was called
}

// NewBuffer allocates nbytes of zeroed C memory. It panics when nbytes is negative or the
// allocation fails, as make does. NewBuffer(0) is an empty Buffer.
func NewBuffer(nbytes int) *Buffer {
	if nbytes < 0 {
		panic(fmt.Sprintf("wsync.NewBuffer: negative size %d", nbytes))
	}
	b := &Buffer{n: nbytes}
	if nbytes > 0 {
		b.p = C.calloc(1, C.size_t(nbytes))
		if b.p == nil {
			panic(fmt.Sprintf("wsync.NewBuffer: out of memory allocating %d bytes", nbytes))
		}
	}
	return b
}

// Len returns the size in bytes (0 after Free, and for a nil Buffer).
func (b *Buffer) Len() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return 0
	}
	return b.n
}

// Pointer returns the address of the memory, for C code of the caller's (nil when empty or freed).
func (b *Buffer) Pointer() unsafe.Pointer {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return nil
	}
	return b.p
}

// Bytes returns the memory as a byte slice (nil when empty or freed). It stays valid until Free.
// Bytes, Len, Pointer, the typed views and Free accept a nil Buffer (an empty tensor's Data).
func (b *Buffer) Bytes() []byte {
	p, n := b.view()
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// Float32s views the memory as float32s (Len/4 of them; C's calloc aligns to at least 8 bytes).
func (b *Buffer) Float32s() []float32 {
	p, n := b.view()
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(p), n/4)
}

// Float64s views the memory as float64s (Len/8 of them).
func (b *Buffer) Float64s() []float64 {
	p, n := b.view()
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float64)(p), n/8)
}

// Int32s views the memory as int32s (Len/4 of them).
func (b *Buffer) Int32s() []int32 {
	p, n := b.view()
	if p == nil {
		return nil
	}
	return unsafe.Slice((*int32)(p), n/4)
}

// Int64s views the memory as int64s (Len/8 of them).
func (b *Buffer) Int64s() []int64 {
	p, n := b.view()
	if p == nil {
		return nil
	}
	return unsafe.Slice((*int64)(p), n/8)
}

// Uint16s views the memory as uint16s (Len/2 of them): the bits of float16 or bfloat16 elements.
func (b *Buffer) Uint16s() []uint16 {
	p, n := b.view()
	if p == nil {
		return nil
	}
	return unsafe.Slice((*uint16)(p), n/2)
}

// Free releases the memory. Idempotent. While wsync borrows the Buffer, the release waits until
// the borrow ends (the Buffer already reads as empty).
func (b *Buffer) Free() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.freed = true
	b.release()
}

// view returns the pointer and length, nil when freed or empty.
func (b *Buffer) view() (unsafe.Pointer, int) {
	if b == nil {
		return nil, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed || b.p == nil {
		return nil, 0
	}
	return b.p, b.n
}

// borrow records a borrow by wsync and returns the memory; false (and no borrow) when freed.
func (b *Buffer) borrow() (unsafe.Pointer, int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return nil, 0, false
	}
	b.pins++
	return b.p, b.n, true
}

// release frees the memory once Free was called and no borrow is left. Called with mu held.
func (b *Buffer) release() {
	if b.freed && b.pins == 0 && b.p != nil {
		C.free(b.p)
		b.p = nil
	}
}

// unpin ends a borrow by wsync.
func (b *Buffer) unpin() {
	b.mu.Lock()
	b.pins--
	b.release()
	b.mu.Unlock()
}

// unpinAll ends the borrows of a list of Buffers (one entry per borrow).
func unpinAll(bufs []*Buffer) {
	for _, b := range bufs {
		b.unpin()
	}
}
