package wsync

/*
#include <stdlib.h>
*/
import "C"

import "unsafe"

// arena collects C allocations made for one call (configs, option arrays, descriptors, names),
// freed together once the call returned: C never sees Go memory, and nothing outlives the call.
type arena struct {
	ptrs []unsafe.Pointer
}

// keep records p to be freed by free.
func (a *arena) keep(p unsafe.Pointer) { a.ptrs = append(a.ptrs, p) }

// str copies s into a NUL-terminated C string owned by the arena.
func (a *arena) str(s string) *C.char {
	c := C.CString(s)
	a.keep(unsafe.Pointer(c))
	return c
}

// strOrNull is str, but "" becomes NULL (the library's default).
func (a *arena) strOrNull(s string) *C.char {
	if s == "" {
		return nil
	}
	return a.str(s)
}

// free releases every allocation of the arena; safe to call twice.
func (a *arena) free() {
	for _, p := range a.ptrs {
		C.free(p)
	}
	a.ptrs = nil
}
