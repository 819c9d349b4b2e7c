package retryriver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// Defaults of Options.
const (
	defaultDeadLetterTimeout = 5 * time.Second
	maxDeadLetterErrors      = 10 // per-attempt errors a dead letter keeps: the first and last 5
)

// Options tunes [Wrap]. The zero value, or a nil *Options, gives the
// defaults.
type Options struct {
	// DeadLetters receives a [retry.DeadLetter] for each job that fails
	// for the last time, which River then discards: Name is the job's
	// kind, Payload its encoded args, IdempotencyKey its key (see Key),
	// Attempts its attempt, Errors the errors River recorded for its
	// attempts (their waits are not known: 0) and this one's, Reason the
	// outcome of the last attempt's Do. Insert it again with [Reinsert]
	// (a handler for deadletter.Redrive) or [RedriveArgs]. A pgdeadletter
	// Sink keeps them in the same database as the jobs. Default: none.
	DeadLetters retry.DeadLetterSink
	// DeadLetterTimeout bounds DeadLetters' Put. Default: 5s.
	DeadLetterTimeout time.Duration
	// Key returns a job's idempotency key, under which the Retrier's
	// [retry.WithIdempotency] store runs its work at most once, so that
	// a job River works again after its work ran (a crash before River
	// recorded the result, a rescued job) replays the outcome instead.
	// Default: "river:job:" and the job's ID. Return a key of your own
	// (from the args, or the job's unique key) to share it with work
	// done outside River. Without WithIdempotency on the Retrier the key
	// is not used but in dead letters.
	Key func(job *rivertype.JobRow) string
}

// Worker wraps a river.Worker so that each attempt of a job is one call of
// a [retry.Retrier]'s Do (classification, observers, metrics, budget,
// breaker, idempotency), River keeping the attempts and the schedule; the
// package doc's Outcomes section maps Do's result to River's. Build one
// with [Wrap], register it with river.AddWorker, and give the Retrier no
// WithDeadLetter, or each failed attempt is dead-lettered.
type Worker[T river.JobArgs] struct {
	inner  river.Worker[T]
	r      *retry.Retrier // the caller's, for its schedule
	once   *retry.Retrier // r with one attempt per call
	policy *Policy
	sink   retry.DeadLetterSink
	put    time.Duration
	key    func(job *rivertype.JobRow) string
}

// Wrap returns inner run through r (nil: the zero retry.Retrier); see
// [Worker]. Its calls are named by r's WithName, or else by the job's
// kind, and take a hold for r's pause as a snooze (in place of r's own
// WithHandOff, if any): see the package doc's Outcomes. inner must not
// be nil, nor opts.DeadLetterTimeout negative; otherwise Wrap returns an
// error wrapping [retry.ErrInvalidOption].
func Wrap[T river.JobArgs](inner river.Worker[T], r *retry.Retrier, opts *Options) (*Worker[T], error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if inner == nil {
		return nil, fmt.Errorf("%w: retryriver.Wrap: the worker is nil", retry.ErrInvalidOption)
	}
	p, err := NewPolicy(r)
	if err != nil {
		return nil, err
	}
	one := []retry.Option{retry.WithMaxAttempts(1)}
	if r.Name() == "" {
		// Work hands the pause's holds off (pauseSnooze), which needs a
		// name: the job's kind, as its dead letters have.
		var args T
		one = append(one, retry.WithName(args.Kind()))
	}
	once, err := r.With(one...)
	if err != nil {
		return nil, err
	}
	if o.DeadLetterTimeout < 0 {
		return nil, fmt.Errorf("%w: retryriver.Wrap: Options.DeadLetterTimeout is %v; it must not be negative (0 is the default)", retry.ErrInvalidOption, o.DeadLetterTimeout)
	}
	w := &Worker[T]{inner: inner, r: r, once: once, policy: p, sink: o.DeadLetters, put: o.DeadLetterTimeout, key: o.Key}
	if w.put == 0 {
		w.put = defaultDeadLetterTimeout
	}
	if w.key == nil {
		w.key = JobKey
	}
	return w, nil
}

// JobKey is the default idempotency key of a job: "river:job:" and its ID.
func JobKey(job *rivertype.JobRow) string {
	return "river:job:" + strconv.FormatInt(job.ID, 10)
}

// Middleware returns the wrapped worker's, after one that fails a job
// whose args do not decode as River would, but writes the dead letter of
// its last attempt, which River would discard unrecorded.
func (w *Worker[T]) Middleware(job *rivertype.JobRow) []rivertype.WorkerMiddleware {
	return append([]rivertype.WorkerMiddleware{river.WorkerMiddlewareFunc(w.decodeGuard)}, w.inner.Middleware(job)...)
}

// decodeGuard runs the job if River can decode its args; otherwise the
// attempt fails, and the last one is dead-lettered with the encoded args
// as payload, to redrive once the args or the worker are fixed.
func (w *Worker[T]) decodeGuard(ctx context.Context, row *rivertype.JobRow, doInner func(context.Context) error) error {
	var args T
	derr := json.Unmarshal(row.EncodedArgs, &args) // as River decodes them
	if derr == nil {
		return doInner(ctx)
	}
	err := fmt.Errorf("retryriver: job %d: %w", row.ID, undecodable(derr))
	if row.Attempt >= row.MaxAttempts && w.sink != nil {
		return w.deadLetter(ctx, row, w.key(row), retry.OutcomePermanent, err.Error(), err)
	}
	return err
}

// Timeout returns the wrapped worker's.
func (w *Worker[T]) Timeout(job *river.Job[T]) time.Duration { return w.inner.Timeout(job) }

// NextRetry returns the wrapped worker's NextRetry if it sets one, else
// the [Policy] of the Retrier's.
func (w *Worker[T]) NextRetry(job *river.Job[T]) time.Time {
	if t := w.inner.NextRetry(job); !t.IsZero() {
		return t
	}
	return w.policy.NextRetry(job.JobRow)
}

// Work runs one attempt of job through the Retrier; see [Worker].
func (w *Worker[T]) Work(ctx context.Context, job *river.Job[T]) (err error) {
	row := job.JobRow
	key := w.key(row)
	final := row.Attempt >= row.MaxAttempts
	if final && w.sink != nil {
		// A panic on the last attempt is a failure River discards: keep
		// its dead letter, then let the panic go on to River.
		defer func() {
			if p := recover(); p != nil {
				_ = w.deadLetter(ctx, row, key, retry.OutcomeExhausted, fmt.Sprintf("panic: %v", p), nil)
				panic(p)
			}
		}()
	}
	hold := &pauseSnooze{left: snoozes(row.Metadata) < int64(row.MaxAttempts)}
	rr, err := w.once.With(retry.WithPayload(row.EncodedArgs), retry.WithHandOff(hold, holdAsSnooze))
	if err != nil {
		return river.JobCancel(err)
	}
	err = rr.Do(retry.ContextWithIdempotencyKey(ctx, key), func(ctx context.Context) error {
		return w.inner.Work(ctx, job)
	})
	if err == nil {
		return nil
	}
	var (
		e       *retry.Error
		cancel  *rivertype.JobCancelError
		snoozed *rivertype.JobSnoozeError
	)
	switch {
	case errors.As(err, &cancel), errors.As(err, &snoozed):
		return err // the wrapped worker's own answer to River
	case !errors.As(err, &e):
		return river.JobCancel(err) // bad input: no attempt can run as configured
	case errors.Is(err, retry.ErrIdempotencyUnavailable):
		// The store failed, so the work did not run: a retryable
		// failure, which River keeps, and dead-letters when it lasts.
	case e.Outcome == retry.OutcomePermanent:
		return river.JobCancel(err)
	case e.Outcome == retry.OutcomeCanceled:
		return err
	case e.Outcome == retry.OutcomeHandedOff && hold.wait > 0:
		return river.JobSnooze(hold.wait) // the pause held the attempt: see pauseSnooze
	}
	if d, server := w.r.Wait(row.Attempt, 0, e.Last, nil); server && hold.left {
		return river.JobSnooze(d)
	}
	if final && w.sink != nil {
		reason := e.Outcome
		if errors.Is(err, retry.ErrIdempotencyUnavailable) {
			reason = retry.OutcomeExhausted // River's attempts, each of which found the store down
		}
		return w.deadLetter(ctx, row, key, reason, errorText(e.Last), err)
	}
	return err
}

// snoozes is the count of snoozes River keeps in a job's metadata.
func snoozes(metadata []byte) int64 {
	var m struct {
		Snoozes int64 `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m)
	return m.Snoozes
}

// deadLetter writes the dead letter of job's last attempt, which failed
// with reason and the error text last; it returns cause, joined with why
// the record was not kept if it was not.
func (w *Worker[T]) deadLetter(ctx context.Context, row *rivertype.JobRow, key string, reason retry.Outcome, last string, cause error) error {
	dl := retry.DeadLetter{
		ID:             deadletter.NewID(),
		Name:           row.Kind,
		IdempotencyKey: key,
		Payload:        bytes.Clone(row.EncodedArgs),
		Attempts:       row.Attempt,
		FirstAttempt:   row.CreatedAt,
		GaveUp:         time.Now(),
		Reason:         reason,
		LastError:      last,
	}
	if len(row.Errors) > 0 {
		dl.FirstAttempt = row.Errors[0].At
	} else if row.AttemptedAt != nil {
		dl.FirstAttempt = *row.AttemptedAt
	}
	for _, ae := range row.Errors {
		dl.Errors = append(dl.Errors, retry.AttemptError{Attempt: ae.Attempt, Error: ae.Error})
	}
	dl.Errors = append(dl.Errors, retry.AttemptError{Attempt: row.Attempt, Error: last})
	if n := len(dl.Errors); n > maxDeadLetterErrors {
		dl.Errors = append(dl.Errors[:maxDeadLetterErrors/2:maxDeadLetterErrors/2], dl.Errors[n-maxDeadLetterErrors/2:]...)
	}
	dl = deadletter.Clip(dl) // each error text to 4096 bytes, as Do's
	pctx, stop := context.WithTimeout(context.WithoutCancel(ctx), w.put)
	defer stop()
	if err := w.sink.Put(pctx, dl); err != nil {
		// Neither the key nor the payload: only that it failed, and why.
		return errors.Join(cause, fmt.Errorf("retryriver: job %d: %w: %w", row.ID, retry.ErrDeadLetterNotRecorded, err))
	}
	return cause
}

// errorText is err's text, "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
