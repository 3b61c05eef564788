package wsync

import "testing"

// wsync.h: an array the library fills is stepped by its first element's struct_size, exactly; a
// size shorter than what the binding reads, or not a multiple of 8, is refused.
func TestArrayStrideIsTheStructSizeExactly(t *testing.T) {
	cases := []struct {
		size  uint32
		reads uintptr
		want  uintptr
		ok    bool
	}{{112, 112, 112, true}, {120, 112, 120, true}, {104, 112, 0, false}, {116, 112, 0, false}}
	for _, c := range cases {
		got, ok := arrayStride(c.size, c.reads)
		if got != c.want || ok != c.ok {
			t.Errorf("arrayStride(%d, %d) = %d, %v; want %d, %v", c.size, c.reads, got, ok, c.want, c.ok)
		}
	}
}
