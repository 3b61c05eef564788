package wsync

import (
	"testing"
	"time"
)

// Negative means the default (-1 to the library), zero "do not block" (0), as in C, Rust and
// Python; positive ones round up to whole milliseconds, so a short timeout never becomes 0.
func TestTimeoutConversion(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0}, {NoWait, 0}, {DefaultTimeout, -1}, {-time.Second, -1}, {time.Nanosecond, 1}, {time.Millisecond, 1},
		{1500 * time.Microsecond, 2}, {2 * time.Second, 2000},
	} {
		if got := int64(timeoutMS(c.d)); got != c.want {
			t.Errorf("timeoutMS(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}
