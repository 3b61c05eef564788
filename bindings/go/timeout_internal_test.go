package wsync

import (
	"testing"
	"time"
)

// Zero and negative mean the default (-1 to the library); positive ones round up to whole
// milliseconds, so a short timeout never becomes "do not block".
func TestTimeoutConversion(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{0, -1}, {-time.Second, -1}, {time.Nanosecond, 1}, {time.Millisecond, 1},
		{1500 * time.Microsecond, 2}, {2 * time.Second, 2000},
	} {
		if got := int64(timeoutMS(c.d)); got != c.want {
			t.Errorf("timeoutMS(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}
