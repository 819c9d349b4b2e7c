// Package retrystats counts the calls of [retry.Retrier]s in memory: an
// observer for a health page or a test.
//
// # Cost
//
// A [Stats] uses atomic counters only: it takes no lock, and makes no
// allocation after its first call. The counters every call adds to are
// striped over cache lines (sets of about 0.6 KB, eight per CPU, at most
// 256), so that calls on many CPUs do not contend for one line.
package retrystats

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/stripe"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
)

// Stats is a [retry.Observer] (for [retry.WithObserver], read with
// [Stats.Snapshot]) that adds up the calls, attempts, retries, waits and
// dead letters of every call, whatever its name (per-operation metrics:
// retryprom, retryotel); its gauges follow the rule in the
// [retry.Observer] doc. The zero Stats is ready; it is safe for concurrent
// use by several Retriers.
type Stats struct {
	// Attempts and calls in flight are derived in Snapshot, which saves
	// two atomic adds per call on the hot path.
	lines      stripe.Lines[counts] // what every call adds to
	noAttempt  atomic.Uint64        // calls ended before their first attempt
	waiting    atomic.Int64
	dlRecorded atomic.Uint64
	dlFailed   atomic.Uint64
	denied     atomic.Uint64 // refused calls: by a budget
	open       atomic.Uint64 // refused calls: by an open circuit
	limited    atomic.Uint64 // refused calls: by a concurrency limit
	rated      atomic.Uint64 // refused calls: by a rate limit
	paused     atomic.Uint64 // refused calls: by a pause
}

// counts are the counters of Stats that every call adds to, one set per
// stripe; Snapshot adds the stripes up.
type counts struct {
	calls       [numOutcomes]atomic.Uint64 // calls ended, by Outcome
	started     atomic.Uint64              // first attempts
	retries     atomic.Uint64              // later attempts
	perCall     [len(attemptBounds) + 1]atomic.Uint64
	duration    [len(durationBounds) + 1]atomic.Uint64
	durationSum atomic.Int64
}

// numOutcomes is the number of Outcome values, retry.OutcomeSuccess to
// retry.OutcomeHandedOff.
const numOutcomes = int(retry.OutcomeHandedOff) + 1

// attemptBounds and durationBounds are the upper bounds of the histograms,
// the same as retryprom's and retryotel's default ones.
var (
	attemptBounds  = retrymetrics.AttemptBounds()
	durationBounds = retrymetrics.DurationBounds()
)

// OnAttemptStart counts the attempt.
func (s *Stats) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	// The attempt that puts its call in flight is its first; Snapshot
	// derives InFlight from started.
	if e.Attempt == 1 {
		s.lines.Get().started.Add(1)
	} else {
		s.lines.Get().retries.Add(1)
	}
}

// OnAttemptEnd does nothing: Stats counts attempts as they start.
func (s *Stats) OnAttemptEnd(context.Context, retry.AttemptEnd) {}

// OnRetry counts a wait in progress when the retry has a delay.
func (s *Stats) OnRetry(_ context.Context, e retry.Scheduled) {
	if e.Delay > 0 {
		s.waiting.Add(1)
	}
}

// OnWaitEnd ends the wait in progress that OnRetry counted.
func (s *Stats) OnWaitEnd(context.Context, retry.WaitEnd) { s.waiting.Add(-1) }

// OnDone counts the call's outcome, attempts, duration and dead letter.
func (s *Stats) OnDone(_ context.Context, e retry.Done) {
	// A call's last wait ended (OnWaitEnd) before its end, noAttempt
	// counts before calls does, and who refused a call after it;
	// Snapshot reads them the other way round, so that a snapshot never
	// shows more calls ended than started, more calls waiting than in
	// flight, nor more refusals by who refused them than Refused.
	if e.Attempts == 0 { // never in flight
		s.noAttempt.Add(1)
	}
	c := s.lines.Get()
	if int(e.Outcome) < numOutcomes {
		c.calls[e.Outcome].Add(1)
	}
	if e.Outcome == retry.OutcomeRefused {
		switch overload.RefuserOf(e.Err) {
		case overload.RefusedByBudget:
			s.denied.Add(1)
		case overload.RefusedByBreaker:
			s.open.Add(1)
		case overload.RefusedByLimit:
			s.limited.Add(1)
		case overload.RefusedByRate:
			s.rated.Add(1)
		case overload.RefusedByPause:
			s.paused.Add(1)
		}
	}
	switch {
	case e.DeadLettered:
		s.dlRecorded.Add(1)
	case e.DeadLetterFailed:
		s.dlFailed.Add(1)
	}
	c.perCall[bucketOf(attemptBounds[:], e.Attempts)].Add(1)
	c.duration[bucketOf(durationBounds[:], e.Elapsed)].Add(1)
	c.durationSum.Add(int64(e.Elapsed))
}

// bucketOf returns the index of the first bound not below v, or
// len(bounds) for the +Inf bucket.
func bucketOf[T int | time.Duration](bounds []T, v T) int {
	for i, b := range bounds {
		if v <= b {
			return i
		}
	}
	return len(bounds)
}

// Snapshot is what a [Stats] has counted, as plain numbers. Counters
// only grow; InFlight and Waiting go up and down.
//
// Once no call is running, the fields agree exactly:
//
//	Calls() == Success + Permanent + Exhausted + MaxElapsed + Deadline + Canceled + Refused + Unknown + HandedOff
//	Retries == Attempts - (Calls() - NoAttempt)
//	InFlight == 0 && Waiting == 0
//
// and at any time BudgetDenied + CircuitOpen + LimitRefused + RateLimited +
// Paused <= Refused.
// While calls run, Snapshot reads the counters one by one, so a snapshot
// may show a call half counted; it never shows InFlight or Waiting below
// 0, nor Waiting above InFlight, nor more refusals by who refused them
// than Refused.
type Snapshot struct {
	// Calls that ended, by outcome (see [retry.Outcome]).
	Success, Permanent, Exhausted, MaxElapsed, Deadline, Canceled, Refused, Unknown uint64
	// HandedOff counts the calls whose remaining attempts went to a
	// retry.HandOff (retry.OutcomeHandedOff): not failures, their work
	// goes on elsewhere.
	HandedOff uint64
	// BudgetDenied, CircuitOpen, LimitRefused, RateLimited and Paused
	// count the Refused calls by who refused them: a retry budget
	// ([overload.ErrBudgetExhausted]), a circuit breaker
	// ([overload.ErrCircuitOpen]), a concurrency limit
	// ([overload.ErrLimitExceeded]), a rate limit
	// ([overload.ErrRateLimited]) or a pause that outlasted the call's
	// deadline ([overload.ErrPaused]), in that order of checking
	// ([overload.RefuserOf]). A refusal that matches none (a guard of
	// one's own with errors of its own, or one that was not built, as a
	// zero retrygobreaker.Breaker) is in Refused only, so Refused may
	// exceed their sum.
	BudgetDenied, CircuitOpen, LimitRefused, RateLimited, Paused uint64
	// NoAttempt counts calls that ended before their first attempt: the
	// context was already done, or, with [retry.WithIdempotency], the store
	// replayed an outcome, refused the call, or another caller held the
	// key for as long as the call could wait. They count in Calls but
	// make no attempt.
	NoAttempt uint64
	// Attempts counts attempts, the first of each call included.
	Attempts uint64
	// Retries counts attempts after the first of their call.
	Retries uint64
	// InFlight is the number of calls between their first attempt and
	// their end (first attempts minus calls ended after one).
	InFlight int64
	// Waiting is the number of calls waiting before their next attempt.
	Waiting int64
	// DeadLettersRecorded and DeadLettersFailed count calls whose dead
	// letter a sink stored, and calls whose dead letter every sink failed
	// to store.
	DeadLettersRecorded, DeadLettersFailed uint64
	// AttemptsPerCall is a histogram of attempts per ended call:
	// AttemptsPerCall[i] counts calls with more attempts than
	// AttemptBounds[i-1] and at most AttemptBounds[i]; the last element
	// counts calls with more than 1000. Calls with no attempt count in
	// the first element. The counts are not cumulative.
	AttemptsPerCall [len(attemptBounds) + 1]uint64
	// AttemptBounds are the upper bounds of AttemptsPerCall: 1, 2, 3, 4,
	// 5, 10, 100, 1000.
	AttemptBounds [len(attemptBounds)]int
	// Duration is a histogram of call durations (Done.Elapsed), laid out
	// like AttemptsPerCall, with bounds DurationBounds: 1ms, 5ms, 10ms,
	// 25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s, 10s, 30s, 1m.
	Duration [len(durationBounds) + 1]uint64
	// DurationBounds are the upper bounds of Duration.
	DurationBounds [len(durationBounds)]time.Duration
	// DurationSum is the total of all call durations.
	DurationSum time.Duration
}

// Calls returns the number of calls that ended: the sum of the outcomes.
func (s Snapshot) Calls() uint64 {
	var n uint64
	for _, c := range s.outcomes() {
		n += *c
	}
	return n
}

// Outcome returns the number of calls that ended with o, or 0 for an
// unknown outcome.
func (s Snapshot) Outcome(o retry.Outcome) uint64 {
	if int(o) >= numOutcomes {
		return 0
	}
	return *s.outcomes()[o]
}

// outcomes returns the outcome fields of s, indexed by retry.Outcome, for
// Snapshot to fill from Stats' counters and for Calls and Outcome to read.
// An Outcome added to retry without a field here fails to compile: the
// literal would be shorter than numOutcomes.
func (s *Snapshot) outcomes() [numOutcomes]*uint64 {
	return [...]*uint64{
		retry.OutcomeSuccess:    &s.Success,
		retry.OutcomePermanent:  &s.Permanent,
		retry.OutcomeExhausted:  &s.Exhausted,
		retry.OutcomeMaxElapsed: &s.MaxElapsed,
		retry.OutcomeDeadline:   &s.Deadline,
		retry.OutcomeCanceled:   &s.Canceled,
		retry.OutcomeRefused:    &s.Refused,
		retry.OutcomeUnknown:    &s.Unknown,
		retry.OutcomeHandedOff:  &s.HandedOff,
	}
}

// Snapshot returns the current counts. It is safe to call while calls
// run, and makes no allocation.
func (s *Stats) Snapshot() Snapshot {
	// Ends are read before starts, so that InFlight is never negative,
	// and who refused before Refused, which OnDone counts first, so that
	// their sum never exceeds it. Go's atomics are sequentially
	// consistent, and each counter is summed over all stripes before the
	// next is read.
	var snap Snapshot
	snap.BudgetDenied = s.denied.Load()
	snap.CircuitOpen = s.open.Load()
	snap.LimitRefused = s.limited.Load()
	snap.RateLimited = s.rated.Load()
	snap.Paused = s.paused.Load()
	for o, c := range snap.outcomes() {
		*c = s.sum(func(c *counts) uint64 { return c.calls[o].Load() })
	}
	snap.NoAttempt = s.noAttempt.Load()
	snap.Waiting = s.waiting.Load()
	snap.DeadLettersRecorded = s.dlRecorded.Load()
	snap.DeadLettersFailed = s.dlFailed.Load()
	snap.AttemptBounds = attemptBounds
	snap.DurationBounds = durationBounds
	snap.DurationSum = time.Duration(s.sum(func(c *counts) uint64 { return uint64(c.durationSum.Load()) }))
	for i := range snap.AttemptsPerCall {
		snap.AttemptsPerCall[i] = s.sum(func(c *counts) uint64 { return c.perCall[i].Load() })
	}
	for i := range snap.Duration {
		snap.Duration[i] = s.sum(func(c *counts) uint64 { return c.duration[i].Load() })
	}
	started := s.sum(func(c *counts) uint64 { return c.started.Load() })
	snap.Retries = s.sum(func(c *counts) uint64 { return c.retries.Load() })
	snap.Attempts = started + snap.Retries
	snap.InFlight = int64(started - (snap.Calls() - snap.NoAttempt))
	return snap
}

// sum adds one counter up over the stripes.
func (s *Stats) sum(counter func(*counts) uint64) uint64 {
	var n uint64
	for c := range s.lines.All() {
		n += counter(c)
	}
	return n
}
