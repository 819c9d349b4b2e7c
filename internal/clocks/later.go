package clocks

import (
	"math"
	"time"
)

// Later returns reading t moved on by d, saturating: a lease of
// math.MaxInt64 (IdempotencyOptions allows it) never ends, and readings in
// a synctest bubble, whose clock starts in 2000, are far below 0.
func Later(t, d time.Duration) time.Duration {
	if s := t + d; (s > t) == (d > 0) {
		return s
	}
	if d > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}
