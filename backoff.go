package retry

import (
	"fmt"
	"math"
	"time"
)

// Backoff computes the wait before the next attempt, before jitter and the
// [WithMaxDelay] cap; a negative result is taken as 0. Implementations
// must be pure, depending only on the arguments and values fixed when
// built, so that one Backoff serves concurrent calls; Do keeps the per-call
// state (attempt number, previous wait) and passes it in.
type Backoff interface {
	// Delay returns the wait after attempt failed, where attempt counts
	// from 1 for the first call of fn. prev is the wait Do used before that
	// attempt (0 after the first attempt). rnd is a uniform sample in
	// [0, 1) from the Retrier's random source, for randomized schedules.
	Delay(attempt int, prev time.Duration, rnd float64) time.Duration
}

// schedule is implemented by the library's own Backoffs, BackoffFunc
// among them: what checkBackoff and config.wait need to know of a Backoff
// beyond its Delay. A Backoff of the user's own has no checks, gets a
// sample and takes the jitter.
type schedule interface {
	Backoff
	// valid reports whether the schedule's parameters, which its
	// constructor cannot check, are fine (for a BackoffFunc, that it is
	// not nil). It calls nothing, so it inlines into the method the
	// interface calls; invalid builds the error when it is false.
	valid() bool
	invalid() error
	// sampling says whether Delay reads its random sample, so that Do
	// draws one, and whether a Jitter applies to what it returns.
	sampling() (reads, jittered bool)
}

var (
	_ schedule = BackoffFunc(nil)
	_ schedule = constant{}
	_ schedule = linear{}
	_ schedule = exponential{}
	_ schedule = decorrelated{}
)

// BackoffFunc adapts a function of the attempt number to a [Backoff], for
// custom schedules: the wait after attempt n failed is f(n). The function
// must be safe for concurrent use.
type BackoffFunc func(attempt int) time.Duration

// Delay returns f(attempt).
func (f BackoffFunc) Delay(attempt int, _ time.Duration, _ float64) time.Duration {
	return f(attempt)
}

func (f BackoffFunc) valid() bool { return f != nil }

func (f BackoffFunc) invalid() error {
	s, _ := nilArg(f)
	return nilBackoff(s)
}

func (BackoffFunc) sampling() (reads, jittered bool) { return false, true }

// Constant waits d after every failed attempt. d must not be negative.
func Constant(d time.Duration) Backoff { return constant{d: d} }

type constant struct{ d time.Duration }

func (c constant) Delay(int, time.Duration, float64) time.Duration { return c.d }

func (c constant) valid() bool { return c.d >= 0 }

func (c constant) invalid() error {
	return fmt.Errorf("%w: Constant(%v): the delay must not be negative", ErrInvalidOption, c.d)
}

func (constant) sampling() (reads, jittered bool) { return false, true }

// Linear waits initial after the first failed attempt and step more after
// each further one, capped at max: min(initial + (n-1)*step, max) after
// attempt n. All three must be non-negative and max at least initial.
func Linear(initial, step, max time.Duration) Backoff {
	return linear{initial: initial, step: step, max: max}
}

type linear struct{ initial, step, max time.Duration }

func (l linear) Delay(attempt int, _ time.Duration, _ float64) time.Duration {
	n := max(attempt-1, 0)
	// Compare before multiplying: step*n can overflow for large n.
	if l.step > 0 && time.Duration(n) > (l.max-l.initial)/l.step {
		return l.max
	}
	return min(l.initial+time.Duration(n)*l.step, l.max)
}

func (l linear) valid() bool { return l.initial >= 0 && l.step >= 0 && l.max >= l.initial }

func (l linear) invalid() error {
	if l.initial < 0 || l.step < 0 || l.max < 0 {
		return fmt.Errorf("%w: Linear(%v, %v, %v): durations must not be negative", ErrInvalidOption, l.initial, l.step, l.max)
	}
	if l.max < l.initial {
		return fmt.Errorf("%w: Linear(%v, %v, %v): max is less than initial", ErrInvalidOption, l.initial, l.step, l.max)
	}
	return nil
}

func (linear) sampling() (reads, jittered bool) { return false, true }

// Exponential waits initial after the first failed attempt, multiplied by
// multiplier after each further one and capped at max: after attempt n,
// min(initial * multiplier^(n-1), max); 100ms, 2 and 1s give 100ms, 200ms,
// 400ms, 800ms, 1s, 1s, .... initial and max must be non-negative, max at
// least initial, and multiplier finite and at least 1.
func Exponential(initial time.Duration, multiplier float64, max time.Duration) Backoff {
	return exponential{initial: initial, multiplier: multiplier, max: max}
}

type exponential struct {
	initial    time.Duration
	multiplier float64
	max        time.Duration
}

func (e exponential) Delay(attempt int, _ time.Duration, _ float64) time.Duration {
	if e.initial == 0 {
		return 0 // 0 * +Inf would be NaN for huge attempt numbers
	}
	n := max(attempt-1, 0)
	// Float maths saturates to +Inf instead of wrapping, and the
	// comparison happens before converting back to an integer.
	f := float64(e.initial) * math.Pow(e.multiplier, float64(n))
	if !(f < float64(e.max)) {
		return e.max
	}
	return durationOf(f)
}

func (e exponential) valid() bool {
	// 1 ≤ multiplier ≤ MaxFloat64: at least 1 and finite, not NaN.
	return e.initial >= 0 && e.max >= e.initial && e.multiplier >= 1 && e.multiplier <= math.MaxFloat64
}

func (e exponential) invalid() error {
	if e.initial < 0 || e.max < 0 {
		return fmt.Errorf("%w: Exponential(%v, %v, %v): durations must not be negative", ErrInvalidOption, e.initial, e.multiplier, e.max)
	}
	if !(e.multiplier >= 1) || math.IsInf(e.multiplier, 1) {
		return fmt.Errorf("%w: Exponential(%v, %v, %v): multiplier must be a finite number of at least 1", ErrInvalidOption, e.initial, e.multiplier, e.max)
	}
	if e.max < e.initial {
		return fmt.Errorf("%w: Exponential(%v, %v, %v): max is less than initial", ErrInvalidOption, e.initial, e.multiplier, e.max)
	}
	return nil
}

func (exponential) sampling() (reads, jittered bool) { return false, true }

// Decorrelated is AWS's "decorrelated jitter" schedule: each wait is drawn
// uniformly from base to three times the previous wait (base before the
// first retry), capped at max. base must be positive and max at least base.
// It is random by itself, so Do applies no [Jitter] on top of it.
func Decorrelated(base, max time.Duration) Backoff {
	return decorrelated{base: base, max: max}
}

type decorrelated struct{ base, max time.Duration }

func (d decorrelated) Delay(_ int, prev time.Duration, rnd float64) time.Duration {
	prev = max(prev, d.base)
	hi := float64(prev) * 3 // float: 3*prev may not fit in an int64
	f := float64(d.base) + clampUnit(rnd)*(hi-float64(d.base))
	if !(f < float64(d.max)) {
		return d.max
	}
	return durationOf(f)
}

func (d decorrelated) valid() bool { return d.base > 0 && d.max >= d.base }

func (d decorrelated) invalid() error {
	if d.base <= 0 {
		return fmt.Errorf("%w: Decorrelated(%v, %v): base must be positive", ErrInvalidOption, d.base, d.max)
	}
	if d.max < d.base {
		return fmt.Errorf("%w: Decorrelated(%v, %v): max is less than base", ErrInvalidOption, d.base, d.max)
	}
	return nil
}

// sampling: Decorrelated is random by itself, and takes no jitter.
func (decorrelated) sampling() (reads, jittered bool) { return true, false }

// durationOf converts f nanoseconds to a Duration, saturating: NaN and
// negative values give 0, values past the int64 range give the largest
// Duration. A plain conversion of an out-of-range float is undefined in Go.
func durationOf(f float64) time.Duration {
	switch {
	case !(f > 0):
		return 0
	case f >= math.MaxInt64: // float64(MaxInt64) rounds up to 2^63
		return math.MaxInt64
	default:
		return time.Duration(f)
	}
}

// clampUnit maps u into [0, 1), taking NaN as 0.
func clampUnit(u float64) float64 {
	switch {
	case !(u > 0):
		return 0
	case u >= 1:
		return math.Nextafter(1, 0)
	default:
		return u
	}
}

// checkBackoff says what is wrong with b, the Backoff given to
// WithBackoff (an Option's v, so nil for WithBackoff(nil)).
func checkBackoff(b any) error {
	// The library's own check themselves: their constructors cannot
	// return an error, and only a BackoffFunc of theirs can be nil.
	if s, ok := b.(schedule); ok {
		if s.valid() {
			return nil
		}
		return s.invalid()
	}
	if s, isNil := nilArg(b); isNil {
		return nilBackoff(s)
	}
	return nil
}

// nilBackoff is the error of WithBackoff given a nil Backoff, named s.
func nilBackoff(s string) error {
	return fmt.Errorf("%w: WithBackoff(%s): the backoff must not be nil", ErrInvalidOption, s)
}
