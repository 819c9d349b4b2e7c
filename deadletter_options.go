package retry

import "time"

// Defaults of the dead-letter options.
const (
	// DefaultDeadLetterTimeout bounds each sink's Put, so that a hanging
	// sink delays the caller by at most this much per sink.
	DefaultDeadLetterTimeout = 5 * time.Second
	// DefaultDeadLetterErrors is how many per-attempt errors a
	// [DeadLetter] keeps: the first 5 and the last 5.
	DefaultDeadLetterErrors = 10
)

// defaultDeadLetterOn is the set of outcomes dead-lettered by default.
// The time budget of WithMaxElapsed is a budget of attempts (ErrMaxElapsed
// matches ErrExhausted), so running out of it counts as exhausted.
const defaultDeadLetterOn = 1<<OutcomeExhausted | 1<<OutcomeMaxElapsed | 1<<OutcomePermanent

// deadLetterConfig holds the dead-letter options. config keeps a pointer
// to it, nil until such an option is given, so that the config of a
// Retrier without dead letters stays small. Options copy it before
// changing it, because Retrier.With shares it with the parent.
type deadLetterConfig struct {
	sink, fallback DeadLetterSink
	on             uint8 // bit 1<<Outcome set: dead-letter that outcome
	onSet          bool
	timeout        time.Duration
	maxErrors      int
	maxErrorsSet   bool
	origin         *DeadLetter // the record being replayed by Redrive
	tunedBy        string      // the first option that tunes a sink, named when none is given
}

// deadLetters returns a private copy of c's dead-letter config to change.
func (c *config) deadLetters() *deadLetterConfig {
	n := new(deadLetterConfig)
	if c.dl != nil {
		*n = *c.dl
	}
	c.dl = n
	return n
}

// tuneDeadLetters is deadLetters for the options that only tune
// WithDeadLetter.
func (c *config) tuneDeadLetters(option string) *deadLetterConfig {
	d := c.deadLetters()
	if d.tunedBy == "" {
		d.tunedBy = option
	}
	return d
}

// checkDeadLetters reports tuning options given without a sink, once all
// options are applied, so that their order does not matter.
func (c *config) checkDeadLetters() {
	if c.dl != nil && c.dl.sink == nil && c.dl.tunedBy != "" {
		c.fail("%s without WithDeadLetter: it has no effect without a sink; add WithDeadLetter(sink) or drop it", c.dl.tunedBy)
	}
}

// active reports whether calls are dead-lettered at all. A fallback comes
// only with a sink (checkDeadLetters).
func (d *deadLetterConfig) active() bool {
	return d != nil && d.sink != nil
}

// covers reports whether a call that ended with o is dead-lettered.
func (d *deadLetterConfig) covers(o Outcome) bool {
	on := uint8(defaultDeadLetterOn)
	if d.onSet {
		on = d.on
	}
	return on&(1<<o) != 0
}

// WithDeadLetter makes every call that gives up with an outcome chosen by
// [WithDeadLetterOn] (by default exhausted, max-elapsed and permanent)
// write a [DeadLetter] to sink before Do returns. Do calls sink.Put once,
// after the final failure, on the caller's goroutine, with a context that keeps
// ctx's values but not its cancellation and times out after
// [WithDeadLetterTimeout]. When the sink (and the fallback, if any) fails,
// Do's error matches both the call's own failure and
// [ErrDeadLetterNotRecorded]: the work is never dropped silently. The
// WithDeadLetter... options below only tune this one: given without it
// (in New, or in [Retrier.With] on a Retrier without it), each is reported
// as an error wrapping [ErrInvalidOption], whatever the order. sink must
// not be nil, nor hold a nil [DeadLetterFunc] or nil pointer. Default:
// none, and no per-attempt history is kept.
func WithDeadLetter(sink DeadLetterSink) Option {
	return func(c *config) {
		if s, isNil := nilArg(sink); isNil {
			c.fail("WithDeadLetter(%s): the sink must not be nil", s)
			return
		}
		c.deadLetters().sink = sink
	}
}

// WithDeadLetterFallback sets a second sink, tried only when the sink of
// [WithDeadLetter] fails or times out, for example a local file behind a
// database. It gets its own [WithDeadLetterTimeout]. sink must not be
// nil, nor hold a nil [DeadLetterFunc] or nil pointer. Default: none.
// Needs [WithDeadLetter].
func WithDeadLetterFallback(sink DeadLetterSink) Option {
	return func(c *config) {
		if s, isNil := nilArg(sink); isNil {
			c.fail("WithDeadLetterFallback(%s): the sink must not be nil", s)
			return
		}
		c.tuneDeadLetters("WithDeadLetterFallback").fallback = sink
	}
}

// WithDeadLetterOn sets which outcomes are dead-lettered, replacing the
// default of [OutcomeExhausted], [OutcomeMaxElapsed] and
// [OutcomePermanent]. Add [OutcomeDeadline] and [OutcomeCanceled] to keep
// calls cut short by their context too. Giving no outcome dead-letters
// nothing. [OutcomeSuccess] and unknown outcomes are invalid.
// Needs [WithDeadLetter].
func WithDeadLetterOn(outcomes ...Outcome) Option {
	return func(c *config) {
		var on uint8
		for _, o := range outcomes {
			if o == OutcomeSuccess || o > OutcomeCanceled {
				c.fail("WithDeadLetterOn(%v): only failure outcomes can be dead-lettered", o)
				return
			}
			on |= 1 << o
		}
		d := c.tuneDeadLetters("WithDeadLetterOn")
		d.on, d.onSet = on, true
	}
}

// WithDeadLetterTimeout bounds each sink's Put: Do waits at most d for the
// sink, and as much again for the fallback, measured on the Retrier's
// clock ([WithClock]). The bound holds for sinks that honour their
// context, as [DeadLetterSink] requires. d must be positive. Default:
// [DefaultDeadLetterTimeout].
// Needs [WithDeadLetter].
func WithDeadLetterTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithDeadLetterTimeout(%v): the timeout must be positive", d)
			return
		}
		c.tuneDeadLetters("WithDeadLetterTimeout").timeout = d
	}
}

// WithDeadLetterErrors bounds how many per-attempt errors a [DeadLetter]
// keeps: all of them up to n, else the first n/2 and the last n-n/2. 0
// keeps none (LastError is always kept). n must not be negative. Default:
// [DefaultDeadLetterErrors].
// Needs [WithDeadLetter].
func WithDeadLetterErrors(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.fail("WithDeadLetterErrors(%d): the bound must not be negative", n)
			return
		}
		d := c.tuneDeadLetters("WithDeadLetterErrors")
		d.maxErrors, d.maxErrorsSet = n, true
	}
}
