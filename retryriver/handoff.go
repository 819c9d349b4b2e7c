package retryriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
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
	// Queue is the River queue of the jobs: at most 64 lowercase letters
	// and digits, runs of which may be joined by one "_", "-" or "|", as
	// River requires (River refuses each insert into another, and every
	// call would wait in memory). Default: river.QueueDefault.
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
// opts.Queue must be a name River accepts, and opts.MaxAttempts must not
// be negative; otherwise it returns an error wrapping
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
		if opts.Queue != "" {
			if problem := queueNameProblem(opts.Queue); problem != "" {
				return nil, fmt.Errorf("%w: retryriver.NewHandOff: HandOffOptions.Queue %q %s", retry.ErrInvalidOption, opts.Queue, problem)
			}
		}
		h.opts.Queue, h.opts.MaxAttempts = opts.Queue, opts.MaxAttempts
	}
	return h, nil
}

// queueName is River's rule for a queue's name (river's validateQueueName,
// which it does not export).
var queueName = regexp.MustCompile(`^[a-z0-9]+(?:[_|-]?[a-z0-9]+)*$`)

// queueNameProblem says what is wrong with a queue's name, "" if nothing.
func queueNameProblem(name string) string {
	switch {
	case len(name) > 64:
		return "is longer than River's 64 bytes"
	case !queueName.MatchString(name):
		return `is no River queue name: lowercase letters and digits, runs of which may be joined by one "_", "-" or "|"`
	}
	return ""
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
// however often River delivers the job. A job of a call that had no key
// runs under the job's own ([JobKey]), so one worker, with one Retrier,
// serves keyed and key-less calls alike. Register it with
// river.AddWorker in every client of the queue: River's rule is that
// every client registers every kind, as any client may work, or rescue,
// any job.
//
// The job completes when the work succeeds, or when its call is handed
// off again (the Retrier has retry.WithHandOff: a new job goes on); it is
// cancelled (river.JobCancel, with the call's error) when the call gives
// up for good, which the Retrier's own retry.WithDeadLetter records: a
// refusal of the Retrier's budget, breaker or concurrency limit too,
// even of the resumed call's first attempt, which the limit sheds as a
// retry (the call made attempts before). River
// retries it, so that no attempt is lost, when fn could not run or was
// cut off: the job's context ended (the client stopping, River's job
// timeout), which Do reports as canceled or deadline, or the idempotency
// store failed (retry.ErrIdempotencyUnavailable), or the call gave up but
// its dead letter was not recorded (retry.ErrDeadLetterNotRecorded): the
// key keeps a side effect that did happen from happening again, and
// replays a permanent failure, whose dead letter is tried again. Give r
// retry.WithHandOff too (with a WithName, which New requires), so that
// each wait of a threshold or more goes back to the queue instead of
// holding the job, and cancel its HandOffOptions.Stopping before the
// client stops, so that waits in progress go back at once. Args that do
// not decode are a permanent failure of a call of [HandOffKind] with the
// job's encoded args as payload: the Retrier's WithDeadLetter records
// it, to redrive with [Reinsert] once fixed.
//
// No attempt of a call is numbered past r's WithMaxAttempts: each job
// carries the count. A River attempt that is cut off (a kill, the job's
// timeout, a store failure) leaves no count of what it did, so River's
// next attempt of the job goes on from the job's count again, and may
// make the same attempts again; River attempts a job at most
// HandOffOptions.MaxAttempts times.
//
// A resumed call that meets r's pause (retry.OverloadOptions.Pause) is
// held as Do holds any call: a pause of r's hand-off threshold or more is
// handed off again, as a job due at its end that carries the call's
// attempts as they were (the pause spends none), and a shorter one is
// held in memory. A pause past the job's timeout is handed off whatever
// the threshold: a call handed off returns at once.
type HandOffWorker struct {
	river.WorkerDefaults[HandOffArgs]
	r     *retry.Retrier
	works map[string]func(ctx context.Context, payload []byte) error
}

// NewHandOffWorker returns a worker that runs the handed-off calls named
// in works (by retry.WithName) through r: works[name] is the call's fn,
// given its payload. A nil r is the zero retry.Retrier; a nil func gives
// an error wrapping retry.ErrInvalidOption. works is copied.
func NewHandOffWorker(r *retry.Retrier, works map[string]func(ctx context.Context, payload []byte) error) (*HandOffWorker, error) {
	w := &HandOffWorker{r: r, works: make(map[string]func(context.Context, []byte) error, len(works))}
	for name, fn := range works {
		if fn == nil {
			return nil, fmt.Errorf("%w: retryriver.NewHandOffWorker: the work named %q is nil", retry.ErrInvalidOption, name)
		}
		w.works[name] = fn
	}
	return w, nil
}

// errUndecodable is the failure of a job whose args do not decode.
var errUndecodable = errors.New("retryriver: the job's args do not decode")

// undecodable is the failure of args that json.Unmarshal refused with
// err, whose text may quote them: only where and why it failed is kept.
func undecodable(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("%w: not JSON (at byte %d)", errUndecodable, syntax.Offset)
	case errors.As(err, &typ):
		kind, _, _ := strings.Cut(typ.Value, " ") // "number 5": not the number
		return fmt.Errorf("%w: a JSON %s at byte %d where %s is a %s", errUndecodable, kind, typ.Offset, typ.Field, typ.Type)
	default:
		return fmt.Errorf("%w: %T", errUndecodable, err)
	}
}

// Middleware returns a middleware that ends a job whose args do not
// decode, which River would otherwise retry and discard unrecorded: see
// [HandOffWorker].
func (w *HandOffWorker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware {
	return []rivertype.WorkerMiddleware{river.WorkerMiddlewareFunc(w.decodeGuard)}
}

// decodeGuard runs the job if River can decode its args, and otherwise
// fails it for good through the Retrier, which dead-letters it.
func (w *HandOffWorker) decodeGuard(ctx context.Context, row *rivertype.JobRow, doInner func(context.Context) error) error {
	var a HandOffArgs
	derr := json.Unmarshal(row.EncodedArgs, &a) // as River decodes them
	if derr == nil {
		return doInner(ctx)
	}
	rr, err := w.r.With(retry.WithName(HandOffKind), retry.WithPayload(row.EncodedArgs), retry.WithMaxAttempts(1))
	if err != nil {
		return river.JobCancel(err)
	}
	cause := undecodable(derr)
	err = rr.Do(retry.ContextWithIdempotencyKey(ctx, JobKey(row)), func(context.Context) error { return retry.Permanent(cause) })
	return river.JobCancel(err)
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
	key := a.Key
	if key == "" {
		key = JobKey(job.JobRow)
	}
	err = rr.Do(retry.ContextWithIdempotencyKey(ctx, key), func(ctx context.Context) error { return fn(ctx, a.Payload) })
	var e *retry.Error
	_, handedOff := errors.AsType[*retry.HandedOff](err)
	switch {
	case err == nil, handedOff:
		return nil
	case errors.As(err, &e) && (e.Outcome == retry.OutcomeCanceled || e.Outcome == retry.OutcomeDeadline):
		return err // the job's context ended: River works the job again
	case errors.Is(err, retry.ErrIdempotencyUnavailable):
		return err // fn did not run: River works the job again
	case errors.Is(err, retry.ErrDeadLetterNotRecorded):
		return err // the give-up has no record yet: River works the job again
	default:
		return river.JobCancel(err)
	}
}
