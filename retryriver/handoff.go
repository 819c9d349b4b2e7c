package retryriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/steadfast-go/retry"
)

// HandOffKind is the kind of the jobs [HandOff] inserts, which a
// [HandOffWorker] works.
const HandOffKind = "retry_handoff"

// HandOffArgs are the args of the job a handed-off call becomes: what a
// [HandOffWorker] needs to run the call's remaining attempts. They hold
// no error text: River records the resumed attempts' own.
type HandOffArgs struct {
	// Name is the call's retry.WithName, under which the work was
	// registered with [NewHandOffWorker].
	Name string `json:"name"`
	// Attempts is how many attempts the call made before it was handed
	// off.
	Attempts int `json:"attempts"`
	// Wait is the wait that was handed off: the job is scheduled at its
	// end.
	Wait time.Duration `json:"wait"`
	// Key is the call's idempotency key, "" if it had none; the resumed
	// call runs under it.
	Key string `json:"key,omitempty"`
	// Payload is the call's retry.WithPayload, given to the work again.
	Payload []byte `json:"payload,omitempty"`
}

// Kind returns [HandOffKind].
func (HandOffArgs) Kind() string { return HandOffKind }

// HandOffOptions tunes [NewHandOff]. A nil *HandOffOptions gives the
// defaults.
type HandOffOptions struct {
	// Queue is the River queue of the jobs. Default: river.QueueDefault.
	Queue string
	// MaxAttempts is River's job.MaxAttempts for the jobs: how often
	// River runs a job whose resumed call was interrupted (its context
	// ended, as when the worker's client stops) before it gives up. The
	// retries of the work itself are the Retrier's, within one River
	// attempt. It must not be negative. Default (0): River's, 25.
	MaxAttempts int
}

// HandOff is a [retry.HandOff] that inserts the remaining attempts of a
// call as a River job of [HandOffArgs], scheduled at the end of the wait,
// inside the caller's transaction when its context carries one
// ([WithTx]). Give it to retry.WithHandOff, and register a
// [HandOffWorker] with the clients that work the queue. It is safe for
// concurrent use.
type HandOff[TTx any] struct {
	client *river.Client[TTx]
	opts   river.InsertOpts
}

// NewHandOff returns a HandOff that inserts jobs with client, which need
// not work them (an insert-only client does). client must not be nil,
// nor opts.MaxAttempts negative; otherwise it returns an error wrapping
// retry.ErrInvalidOption.
func NewHandOff[TTx any](client *river.Client[TTx], opts *HandOffOptions) (*HandOff[TTx], error) {
	if client == nil {
		return nil, fmt.Errorf("%w: retryriver.NewHandOff: the River client is nil", retry.ErrInvalidOption)
	}
	h := &HandOff[TTx]{client: client}
	if opts != nil {
		if opts.MaxAttempts < 0 {
			return nil, fmt.Errorf("%w: retryriver.NewHandOff: HandOffOptions.MaxAttempts is %d; it must not be negative (0 is River's default)", retry.ErrInvalidOption, opts.MaxAttempts)
		}
		h.opts.Queue, h.opts.MaxAttempts = opts.Queue, opts.MaxAttempts
	}
	return h, nil
}

// txKey is the context key of [WithTx].
type txKey[TTx any] struct{}

// WithTx returns a copy of ctx carrying tx, so that a [HandOff] on a
// client of the same driver inserts its job in tx (River's InsertTx): the
// job exists only if tx commits. Pass it to Do as the call's context.
func WithTx[TTx any](ctx context.Context, tx TTx) context.Context {
	return context.WithValue(ctx, txKey[TTx]{}, tx)
}

// HandOff inserts w as a job scheduled at w.Due, in the transaction of
// ctx if it has one ([WithTx]), and returns the job's ID in decimal. Due
// is on the Retrier's clock: use the real one with a HandOff. An insert
// that fails in a transaction leaves it aborted on PostgreSQL: the call
// then waits in memory as retry.WithHandOff says, but the transaction
// can only be rolled back.
func (h *HandOff[TTx]) HandOff(ctx context.Context, w retry.Waiting) (string, error) {
	args := HandOffArgs{Name: w.Name, Attempts: w.Attempts, Wait: w.Wait, Key: w.IdempotencyKey, Payload: w.Payload}
	opts := h.opts
	opts.ScheduledAt = w.Due
	var (
		res *rivertype.JobInsertResult
		err error
	)
	if tx, ok := ctx.Value(txKey[TTx]{}).(TTx); ok {
		res, err = h.client.InsertTx(ctx, tx, args, &opts)
	} else {
		res, err = h.client.Insert(ctx, args, &opts)
	}
	if err != nil {
		return "", fmt.Errorf("retryriver: handing off the attempts of %q: %w", w.Name, err)
	}
	return strconv.FormatInt(res.Job.ID, 10), nil
}

// HandOffWorker works the jobs of [HandOff]: it runs each job's remaining
// attempts through its Retrier, continuing the call's count
// (retry.WithResume), with the call's name and payload, under its
// idempotency key, so that a side effect the call's attempts guard with
// retry.WithIdempotency happens once whichever process runs them and
// however often River delivers the job. Register it with river.AddWorker.
//
// The job completes when the work succeeds, or when its call is handed
// off again (the Retrier has retry.WithHandOff: a new job goes on); it is
// cancelled (river.JobCancel, with the call's error) when the call gives
// up, which the Retrier's own retry.WithDeadLetter records; and River
// retries it when the job's context ended (the client stopping, or
// River's job timeout passing, which Do reports as canceled or
// deadline), so that no attempt is lost: the key keeps a side effect
// that did happen from happening again. A job's remaining attempts and
// their waits must fit in River's job timeout (river.Config.JobTimeout,
// 1 minute by default): give r retry.WithHandOff too, so that each wait
// of a threshold or more goes back to the queue.
type HandOffWorker struct {
	river.WorkerDefaults[HandOffArgs]
	r     *retry.Retrier
	works map[string]func(ctx context.Context, payload []byte) error
}

// NewHandOffWorker returns a worker that runs the handed-off calls named
// in works (by retry.WithName) through r: works[name] is the call's fn,
// given its payload. r and the funcs must not be nil; otherwise it
// returns an error wrapping retry.ErrInvalidOption. works is copied.
func NewHandOffWorker(r *retry.Retrier, works map[string]func(ctx context.Context, payload []byte) error) (*HandOffWorker, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: retryriver.NewHandOffWorker: the Retrier is nil", retry.ErrInvalidOption)
	}
	w := &HandOffWorker{r: r, works: make(map[string]func(context.Context, []byte) error, len(works))}
	for name, fn := range works {
		if fn == nil {
			return nil, fmt.Errorf("%w: retryriver.NewHandOffWorker: the work named %q is nil", retry.ErrInvalidOption, name)
		}
		w.works[name] = fn
	}
	return w, nil
}

// Work runs the remaining attempts of the job's call; see [HandOffWorker].
func (w *HandOffWorker) Work(ctx context.Context, job *river.Job[HandOffArgs]) error {
	a := job.Args
	fn, ok := w.works[a.Name]
	if !ok {
		return river.JobCancel(fmt.Errorf("%w: retryriver.HandOffWorker: no work named %q was given to NewHandOffWorker", retry.ErrInvalidOption, a.Name))
	}
	rr, err := w.r.With(retry.WithName(a.Name), retry.WithPayload(a.Payload), retry.WithResume(a.Attempts, max(a.Wait, 0)))
	if err != nil {
		return river.JobCancel(err)
	}
	if a.Key != "" {
		ctx = retry.ContextWithIdempotencyKey(ctx, a.Key)
	}
	err = rr.Do(ctx, func(ctx context.Context) error { return fn(ctx, a.Payload) })
	var e *retry.Error
	switch {
	case err == nil, errors.Is(err, retry.ErrHandedOff):
		return nil
	case errors.As(err, &e) && (e.Outcome == retry.OutcomeCanceled || e.Outcome == retry.OutcomeDeadline):
		return err // the job's context ended: River works the job again
	default:
		return river.JobCancel(err)
	}
}
