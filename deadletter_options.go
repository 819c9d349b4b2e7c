package retry

import "time"

// Defaults of dead letters, used for zero fields of DeadLetterOptions.
const (
	defaultDeadLetterTimeout = 5 * time.Second
	defaultDeadLetterErrors  = 10 // the first 5 and the last 5
)

// defaultDeadLetterOn is the set of outcomes dead-lettered by default:
// every call whose work was not done or may not have been, but one the
// caller cancelled. The time budget of WithMaxElapsed is a budget of
// attempts (its cause is ErrExhausted), so running out of it counts as
// exhausted. A deadline counts once an attempt was made (see
// afterAttempt).
const defaultDeadLetterOn = 1<<OutcomeExhausted | 1<<OutcomeMaxElapsed | 1<<OutcomePermanent | 1<<OutcomeRefused | 1<<OutcomeDeadline | 1<<OutcomeUnknown | afterAttempt

// afterAttempt is a bit of deadLetterConfig.on, where OutcomeSuccess's
// bit is free: OutcomeDeadline counts only for a call that made an
// attempt. A call whose context was over before its first attempt did
// nothing, and its caller knows it.
const afterAttempt = 1 << OutcomeSuccess

// DeadLetterOptions tunes [WithDeadLetter]. The zero value, or a nil
// *DeadLetterOptions, gives the defaults; zero means the default in every
// field.
type DeadLetterOptions struct {
	// Fallback is a second sink, tried only when the first fails or times
	// out, for example a local file behind a database. It gets its own
	// Timeout. Default: none.
	Fallback DeadLetterSink
	// On lists the outcomes that are dead-lettered. [OutcomeSuccess],
	// [OutcomeHandedOff] (the work goes on elsewhere) and values that are
	// no Outcome are invalid. Default (nil or empty):
	// every outcome whose work was not done or may not have been:
	// [OutcomeExhausted], [OutcomeMaxElapsed], [OutcomePermanent],
	// [OutcomeRefused], [OutcomeUnknown], and [OutcomeDeadline] for a call
	// that made at least one attempt (a deadline says how long the caller
	// waits, not that the work stopped mattering). Not [OutcomeCanceled]:
	// the caller stopped the work on purpose; add it to keep those too.
	On []Outcome
	// Timeout bounds each sink's Put, on the Retrier's clock
	// ([WithClock]): Do waits at most this for the sink, and as much again
	// for the fallback, whatever the sink does. A Put still running then
	// is left to finish on its own goroutine and counts as failed
	// ([ErrDeadLetterNotRecorded]). At most 16 Puts of one WithDeadLetter
	// run at once; a call that finds them all busy waits for one within
	// this. A panic in Put counts as the sink's failure. Default: 5s.
	Timeout time.Duration
	// MaxErrors bounds how many per-attempt errors a [DeadLetter] keeps:
	// all of them up to MaxErrors, else the first half and the last half.
	// Negative keeps none (LastError is always kept). Default: 10.
	MaxErrors int
}

// deadLetterConfig holds the dead-letter settings with their defaults
// resolved. WithDeadLetter makes it once; it is never changed after.
type deadLetterConfig struct {
	sink, fallback DeadLetterSink
	on             uint8 // bit 1<<Outcome set: dead-letter that outcome
	timeout        time.Duration
	maxErrors      int
	origin         *DeadLetter   // the record being replayed (Retrier.ForRedrive)
	puts           chan struct{} // a slot per Put running, maxPuts in all
}

// active reports whether calls are dead-lettered at all.
func (d *deadLetterConfig) active() bool {
	return d != nil && d.sink != nil
}

// covers reports whether a call that ended with e is dead-lettered.
func (d *deadLetterConfig) covers(e *Error) bool {
	if e.Outcome == OutcomeDeadline && e.Attempts == 0 && d.on&afterAttempt != 0 {
		return false
	}
	if e.Outcome == OutcomeHandedOff { // not a failure; and its bit would be past on's eight
		return false
	}
	return d.on&(1<<e.Outcome) != 0
}

// WithDeadLetter makes a call that gives up with an outcome chosen by
// DeadLetterOptions.On (by default every failure but a cancel, and a
// deadline that came before any attempt) write a [DeadLetter] to sink
// before Do returns. opts may be nil for the defaults; sink and
// opts.Fallback must not hold a nil pointer or func. Default: none. Dead
// letters in the package doc gives the rules, and the error if both fail.
func WithDeadLetter(sink DeadLetterSink, opts *DeadLetterOptions) Option {
	var o DeadLetterOptions
	if opts != nil {
		o = *opts
		o.On = append([]Outcome(nil), o.On...) // the caller may reuse its slice
	}
	if s, isNil := nilArg(sink); isNil {
		return invalid("WithDeadLetter(%s, opts): the sink must not be nil", s)
	}
	if s, isNil := nilArg(o.Fallback); o.Fallback != nil && isNil {
		return invalid("WithDeadLetter: DeadLetterOptions.Fallback is %s; leave it nil for none", s)
	}
	if o.Timeout < 0 {
		return invalid("WithDeadLetter: DeadLetterOptions.Timeout is %v; it must not be negative (0 is the default)", o.Timeout)
	}
	d := &deadLetterConfig{sink: sink, fallback: o.Fallback, on: defaultDeadLetterOn,
		timeout: or(o.Timeout, defaultDeadLetterTimeout), maxErrors: o.MaxErrors, puts: make(chan struct{}, maxPuts)}
	switch {
	case o.MaxErrors == 0:
		d.maxErrors = defaultDeadLetterErrors
	case o.MaxErrors < 0:
		d.maxErrors = 0
	}
	if len(o.On) > 0 {
		d.on = 0
		for _, out := range o.On {
			if out == OutcomeSuccess || out == OutcomeHandedOff || out > lastOutcome {
				return invalid("WithDeadLetter: DeadLetterOptions.On holds %v; only failure outcomes can be dead-lettered", out)
			}
			d.on |= 1 << out
		}
	}
	return Option{set: setDeadLetter, v: d}
}

// maxPuts bounds the Puts of one WithDeadLetter that run at once, those
// left running past their timeout (their sink ignored its context)
// included: a call that finds them all busy waits for one to end, within
// its timeout.
const maxPuts = 16
