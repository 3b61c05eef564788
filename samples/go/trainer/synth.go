package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../common
#cgo pkg-config: wsync libxxhash
#include <stdlib.h>
#include "synthetic_model.h"
*/
import "C"

import (
	"unsafe"

	"wsync.dev/wsync"
)

// maxTensors is the capacity of the spec array, as in the C trainer.
const maxTensors = 1024

// model is the synthetic model of samples/common: its spec lives in C memory, where synth_fill
// reads it.
type model struct {
	spec []C.synth_tensor_t
}

// newModel returns the model's tensors at `scale` (1.0 = the ~1 GiB demo model).
func newModel(scale float64) *model {
	p := (*C.synth_tensor_t)(C.calloc(maxTensors, C.size_t(unsafe.Sizeof(C.synth_tensor_t{}))))
	if p == nil {
		panic("out of memory")
	}
	all := unsafe.Slice(p, maxTensors)
	n := int(C.synth_model_spec(C.double(scale), p, maxTensors))
	if n > maxTensors {
		n = maxTensors
	}
	return &model{spec: all[:n]}
}

// len returns the number of tensors.
func (m *model) len() int { return len(m.spec) }

// tensor describes tensor i with Data (nil for an empty tensor) as its memory.
func (m *model) tensor(i int, data *wsync.Buffer) wsync.Tensor {
	s := &m.spec[i]
	shape := make([]int64, int(s.ndim))
	for j := range shape {
		shape[j] = int64(s.shape[j])
	}
	return wsync.Tensor{Name: C.GoString(&s.name[0]), Dtype: wsync.Dtype(s.dtype), Shape: shape, Data: data}
}

// nbytes returns the size of tensor i.
func (m *model) nbytes(i int) int { return int(m.spec[i].nbytes) }

// fill writes tensor i's bytes at `version` straight into b ("trains a step").
func (m *model) fill(i int, version uint64, b *wsync.Buffer) {
	if b.Len() > 0 {
		C.synth_fill(&m.spec[i], C.uint64_t(version), b.Pointer())
	}
}
