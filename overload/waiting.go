package overload

import (
	"fmt"
	"sync/atomic"
	"time"
)

// waitLimit bounds the calls parked in a wait at once. The zero waitLimit
// has no bound.
type waitLimit struct {
	max     int64
	waiting atomic.Int64
	refused error // made once, so that a refusal allocates nothing
}

func (w *waitLimit) init(max int) error {
	if max < 0 {
		return fmt.Errorf("overload: MaxWaiting %d is negative (0 means no limit)", max)
	}
	w.max = int64(max)
	w.refused = fmt.Errorf("%w: %d calls are already waiting to retry (MaxWaiting)", ErrBudgetExhausted, max)
	return nil
}

// enter takes a waiting slot for a wait of d; a zero wait parks nothing.
func (w *waitLimit) enter(d time.Duration) error {
	if w.max == 0 || d <= 0 {
		return nil
	}
	if w.waiting.Add(1) > w.max {
		w.waiting.Add(-1)
		return w.refused
	}
	return nil
}

// leave gives back the slot of a wait that enter allowed.
func (w *waitLimit) leave() {
	if w.max != 0 {
		w.waiting.Add(-1)
	}
}
