package clocks

import (
	"math"
	"testing"
	"time"
)

func TestLater_saturates(t *testing.T) {
	for _, c := range []struct{ t, d, want time.Duration }{
		{5, 3, 8},
		{5, 0, 5},
		{5, -7, -2},
		{-8e17, 3e18, 22e17}, // a synctest bubble's reading, a third of a forever lease
		{1, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 - 1, 2, math.MaxInt64},
		{-8e17, math.MaxInt64, math.MaxInt64 - 8e17},
		{math.MinInt64 + 1, -2, math.MinInt64},
	} {
		if got := Later(c.t, c.d); got != c.want {
			t.Errorf("Later(%d, %d) = %d, want %d", c.t, c.d, got, c.want)
		}
	}
}
