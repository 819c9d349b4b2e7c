package retry

import (
	"context"
	"time"
)

// Defaults of HandOffOptions.
const (
	defaultHandOffThreshold = time.Minute     // the shortest wait handed off
	defaultHandOffTimeout   = 2 * time.Second // a database insert's bound, with room for a slow one
	minHandOffTimeout       = time.Millisecond
)

// HandOffOptions tunes [WithHandOff]. A nil *HandOffOptions gives the
// defaults.
type HandOffOptions struct {
	// Threshold is the shortest wait handed off; shorter ones are waited
	// in memory. It must not be negative. Default (0): 1 minute.
	Threshold time.Duration
	// Stopping, once done, hands off every wait whatever its length,
	// waits already under way included, which end at once: give it a
	// context that ends when the process begins to shut down (such as
	// signal.NotifyContext's), so that calls waiting to retry do not hold
	// it up nor lose their work. Default: nil, never.
	Stopping context.Context
	// Timeout bounds each call of HandOff; past it the call waits in
	// memory. It must be 0 (the default, 2s) or at least 1ms.
	Timeout time.Duration
}

// handOffConfig is WithHandOff's setting.
type handOffConfig struct {
	h         HandOff
	threshold time.Duration
	timeout   time.Duration
	stopping  context.Context // nil: never
}

// takes says whether a wait of d is handed off: it is long, or the
// process is stopping. A nil *handOffConfig takes none.
func (ho *handOffConfig) takes(d time.Duration) bool {
	return ho != nil && (d >= ho.threshold || ho.stopped())
}

// stopped says whether the process is stopping.
func (ho *handOffConfig) stopped() bool { return ho.stopping != nil && ho.stopping.Err() != nil }

// WithHandOff gives a call's remaining attempts to h instead of waiting,
// when the next wait is at least o.Threshold (default 1 minute) or
// o.Stopping is closed, even a wait that would end past the context's
// deadline: a call handed off returns at once, so its deadline need not
// cover the wait. The call then ends with an [*Error] of
// [OutcomeHandedOff] whose Cause is a [*HandedOff] holding the ID h
// returned. Such a call has not failed: dead
// letters do not record it by default, and observers count it as its own
// outcome (Done, with no OnRetry for the wait it did not make). A budget's
// leave to retry is given back. If h fails, returns an empty ID or
// outlasts o.Timeout, the call waits in memory as it would have without
// the option, and observers hear the retry and the wait as for any other:
// nothing is lost (a wait past the deadline then ends the call with
// [OutcomeDeadline] at once). h is asked on the call's goroutine, before
// the wait, after an [overload.Budget] or [overload.Breaker] allowed it. The Retrier needs
// [WithName], by which a worker finds the work to resume; h must not be
// nil, nor o.Threshold negative. Default: none; a Retrier without it asks
// nothing and costs nothing more.
func WithHandOff(h HandOff, o *HandOffOptions) Option {
	if s, isNil := nilArg(h); isNil {
		return invalid("WithHandOff(%s, ...): the HandOff must not be nil", s)
	}
	c := &handOffConfig{h: h, threshold: defaultHandOffThreshold, timeout: defaultHandOffTimeout}
	if o != nil {
		switch {
		case o.Threshold < 0:
			return invalid("WithHandOff: HandOffOptions.Threshold is %v; it must not be negative (0 is the default, 1 minute)", o.Threshold)
		case o.Timeout < 0 || o.Timeout > 0 && o.Timeout < minHandOffTimeout:
			return invalid("WithHandOff: HandOffOptions.Timeout is %v; it must be 0 (the default, %v) or at least %v", o.Timeout, defaultHandOffTimeout, minHandOffTimeout)
		}
		c.threshold = or(o.Threshold, c.threshold)
		c.timeout = or(o.Timeout, c.timeout)
		c.stopping = o.Stopping
	}
	return Option{set: setHandOff, v: c}
}

// resumeConfig is WithResume's setting.
type resumeConfig struct {
	attempts int
	wait     time.Duration
}

// WithResume makes each call go on with the attempts of a call that was
// handed off ([WithHandOff]) after attempts attempts, before a wait of
// wait: a [Waiting]'s Attempts and Wait. The call's first attempt is
// attempt attempts+1 for observers, [WithMaxAttempts] counts the attempts
// already made, the [*Error] reports them all, and the schedule goes on
// from wait (as [Decorrelated] grows from the previous wait); a handed-off
// call hands off again with the total. The call makes at least one
// attempt, even if attempts already reaches WithMaxAttempts. The time
// budget of [WithMaxElapsed] counts from the resumed call's start. A
// worker that runs handed-off work derives a Retrier per job with it
// ([Retrier.With]), as retryriver's HandOffWorker does. attempts and wait
// must not be negative; attempts above 2³¹-1 count as that many, so that
// no count can overflow. Default: a call starts afresh.
func WithResume(attempts int, wait time.Duration) Option {
	switch {
	case attempts < 0:
		return invalid("WithResume(%d, %v): the attempts made must not be negative", attempts, wait)
	case wait < 0:
		return invalid("WithResume(%d, %v): the wait must not be negative", attempts, wait)
	}
	return Option{set: setResume, v: &resumeConfig{attempts: min(attempts, maxResumedAttempts), wait: wait}}
}

// maxResumedAttempts bounds WithResume's count: more than any call makes,
// and far enough from the largest int that counting on cannot overflow.
const maxResumedAttempts = 1<<31 - 1
