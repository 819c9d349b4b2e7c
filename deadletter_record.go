package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/steadfast-go/retry/internal/clip"
)

// deadLettering is the hook of WithDeadLetter: it keeps the failed
// attempts and, when the call gives up with a covered outcome, writes the
// record before Do returns.
type deadLettering[T any] struct {
	noHook[T]
	log *attemptLog // the call's failed attempts; nil until the first
}

// after logs a failed attempt for the record. The log is made at the
// first failure, so a call that succeeds at once allocates nothing.
func (h *deadLettering[T]) after(c *call, a *attemptState, v T, err error) (T, error) {
	if err != nil {
		if h.log == nil {
			h.log = newAttemptLog(c.cfg.dl)
		}
		h.log.add(a.attempt(c), c.wait.prev, err)
	}
	return v, err
}

// end writes the dead letter of a call that failed, unless the work did
// not fail (see notFailedWork). A redrive's replay that replayed a stored
// failure is written all the same: the record it replays is marked
// redriven already, and without a new one the work would be lost.
func (h *deadLettering[T]) end(c *call, v T, err error, d *Done) (T, error) {
	e, ok := err.(*Error)
	if !ok || notFailedWork(e.Last) && (c.cfg.dl.origin == nil || !replayedFailure(e.Last)) {
		return v, err
	}
	err, d.DeadLettered, d.DeadLetterFailed = c.deadLetter(e, h.log)
	return v, err
}

// attemptLog keeps the per-attempt errors of one call for its dead letter:
// the first headMax in head, then the most recent tailMax in a ring. The
// slices grow with the errors kept, not with the bound: MaxErrors may be
// large ("keep them all") while a call makes a few attempts.
type attemptLog struct {
	head, tail       []AttemptError // tail: a ring of the latest errors once head is full
	headMax, tailMax int
	next             int // index in tail of the next write, once tail is full
}

func newAttemptLog(d *deadLetterConfig) *attemptLog {
	n := d.maxErrors
	l := &attemptLog{headMax: n / 2, tailMax: n - n/2}
	// Room for the first few up front, as many calls fail a few times:
	// one allocation, not one per growth, and never one sized by a large
	// MaxErrors.
	l.head = make([]AttemptError, 0, min(l.headMax, 8))
	return l
}

// add records that attempt failed with err after a wait of wait.
func (l *attemptLog) add(attempt int, wait time.Duration, err error) {
	if l.headMax == 0 && l.tailMax == 0 {
		return
	}
	e := AttemptError{Attempt: attempt, Wait: wait, Error: errorText(err)}
	switch {
	case len(l.head) < l.headMax:
		l.head = append(l.head, e)
	case len(l.tail) < l.tailMax:
		l.tail = append(l.tail, e)
	default:
		l.tail[l.next] = e
		l.next = (l.next + 1) % len(l.tail)
	}
}

// list returns the kept errors, oldest first; nil for a nil log.
func (l *attemptLog) list() []AttemptError {
	if l == nil || len(l.head)+len(l.tail) == 0 {
		return nil
	}
	out := make([]AttemptError, 0, len(l.head)+len(l.tail))
	out = append(out, l.head...)
	out = append(out, l.tail[l.next:]...)
	return append(out, l.tail[:l.next]...)
}

// deadLetter writes the dead letter of a call that ended with e, with the
// failed attempts in log, if its outcome is covered, and returns what Do
// returns and, for Done, whether a sink stored it or every sink failed.
func (c *call) deadLetter(e *Error, log *attemptLog) (err error, stored, failed bool) {
	d := c.cfg.dl
	if !d.covers(e) {
		return e, false, false
	}
	spent := c.sinceStart()
	gaveUp := c.cfg.wallNow()
	dl := DeadLetter{
		ID:           newDeadLetterID(),
		Name:         c.cfg.name,
		Payload:      bytes.Clone(c.cfg.payload),
		Attempts:     c.attempts,
		FirstAttempt: gaveUp.Add(-spent),
		GaveUp:       gaveUp,
		Reason:       e.Outcome,
		Errors:       log.list(),
	}
	if e.Last != nil {
		dl.LastError = errorText(e.Last)
	}
	if re := (*replayedError)(nil); errors.As(e.Last, &re) && re.unknown {
		dl.Reason = OutcomeUnknown // a replay: the letter is of the call it replays
	}
	// A 10 MB error over 20 attempts must not make a 200 MB record.
	dl.LastError, dl.Errors = clip.Record(dl.LastError, dl.Errors, func(a *AttemptError) *string { return &a.Error })
	dl.IdempotencyKey = c.cfg.idempotencyKey(c.ctx)
	if o := d.origin; o != nil {
		if dl.IdempotencyKey == "" {
			dl.IdempotencyKey = o.IdempotencyKey
		}
		dl.Redrives, dl.RedriveOf = o.Redrives+1, o.ID
	}
	var errs []error
	for _, sink := range [...]DeadLetterSink{d.sink, d.fallback} {
		if sink == nil {
			continue
		}
		err := c.putDeadLetter(sink, dl)
		if err == nil {
			return e, true, false
		}
		errs = append(errs, err)
	}
	return &notRecordedError{err: e, sinks: errs}, false, true
}

// putGrace is how long Do waits, after a Put's context ended, for the Put
// to return before it leaves it running.
const putGrace = 50 * time.Millisecond

// putDeadLetter calls sink.Put with a context that survives the call's
// cancellation (the work must still be recorded) but not the timeout. Put
// runs on a goroutine of its own, one of at most maxPuts, so that Do stops
// waiting when the timeout ends whatever the sink does; the record of a
// Put still running then is reported as not recorded. A panic in Put is
// the sink's failure, not the caller's crash.
func (c *call) putDeadLetter(sink DeadLetterSink, dl DeadLetter) error {
	d := c.cfg.dl
	ctx, cancel := c.cfg.withTimeout(context.WithoutCancel(c.ctx), d.timeout)
	defer cancel()
	select {
	case d.puts <- struct{}{}:
	case <-ctx.Done():
		return errPutsBusy
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-d.puts }()
		done <- safePut(ctx, sink, dl)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// A sink that honours its context returns within moments of its end.
	grace := time.NewTimer(putGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
	}
	return errPutHung
}

// safePut is sink.Put, with a panic turned into the sink's error. Its
// value is left out: it may hold the record.
func safePut(ctx context.Context, sink DeadLetterSink, dl DeadLetter) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("retry: the dead-letter sink panicked (%T)", v)
		}
	}()
	return sink.Put(ctx, dl)
}

// errPutHung is a sink's failure when its Put did not return by the end of
// DeadLetterOptions.Timeout, although its context was done.
var errPutHung = errors.New("retry: the dead-letter sink did not return within DeadLetterOptions.Timeout; its Put is left running")

// errPutsBusy is a sink's failure when maxPuts of its Puts ran for a whole
// DeadLetterOptions.Timeout.
var errPutsBusy = fmt.Errorf("retry: %d dead-letter Puts of this sink were running for all of DeadLetterOptions.Timeout; this one was not started", maxPuts)

// notRecordedError is what Do returns when a call should have been
// dead-lettered and no sink stored it. It matches the call's *Error (and
// through it the last attempt's error and the cause),
// ErrDeadLetterNotRecorded, and every sink's error.
type notRecordedError struct {
	err   *Error
	sinks []error
}

func (n *notRecordedError) Error() string {
	var b strings.Builder
	b.WriteString(errorText(n.err))
	b.WriteString(" (dead letter not recorded: ")
	for i, err := range n.sinks {
		if i > 0 {
			b.WriteString("; fallback: ")
		}
		b.WriteString(errorText(err))
	}
	b.WriteString(")")
	return b.String()
}

func (n *notRecordedError) Unwrap() []error {
	return append([]error{n.err, ErrDeadLetterNotRecorded}, n.sinks...)
}
