package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/steadfast-go/retry/internal/isnil"
)

// RedriveSource is a store of dead letters that [Redrive] can replay. The
// file sink ([FileSink]), the memory sink and the PostgreSQL sink implement
// it. Methods must be safe for concurrent use.
type RedriveSource interface {
	// DeadLetterSink is where a replay that fails again is recorded, as
	// a new record, when the Retrier given to Redrive has no sink.
	DeadLetterSink
	// Pending returns the records not yet claimed for redrive, oldest
	// first.
	Pending(ctx context.Context) ([]DeadLetter, error)
	// Claim marks the record id as redriven, durably, before it is
	// replayed. It must be atomic: for each id it returns true to at most
	// one caller ever, from any goroutine (and, for shared stores, any
	// process), and false when the record was already claimed or is
	// unknown.
	Claim(ctx context.Context, id string) (bool, error)
}

// RedriveReport says what a call of [Redrive] did. Each of the Pending
// records is counted in at most one of the other fields, and in exactly
// one unless Redrive stopped early.
type RedriveReport struct {
	Pending     int // pending records the filter accepted
	Skipped     int // of those, claimed by another redrive first
	Succeeded   int // replays that succeeded
	Failed      int // replays that failed again and were dead-lettered anew
	NotRecorded int // replays that failed again and whose new dead letter no sink stored
}

// Redrive replays the pending dead letters of src that filter accepts
// (all of them when filter is nil), oldest first, each through r with
// handler as the operation. It is the way back for work that failed while a
// dependency was down.
//
// Each record is claimed in src before it is replayed, so no record is
// ever replayed twice, also when several Redrives run at once; a crash
// during a replay leaves the record claimed and not replayed again.
//
// A replay keeps the record's idempotency key, so that replaying work that
// meanwhile succeeded is a no-op. When r was built with [WithIdempotency]
// (use key "": each record brings its own), the replay runs under the
// record's key: a key whose work completed replays the stored outcome
// without calling handler. Note that a permanent failure is stored too, so
// redriving a permanent failure under its key replays that failure; such
// records are best redriven with a Retrier without idempotency and a
// handler that checks dl.IdempotencyKey itself. Records without a key
// are replayed without the store. Without WithIdempotency, handler gets
// the key in dl.IdempotencyKey and must make the work idempotent itself.
//
// A replay runs with r's policy, named and with the payload of the record.
// A replay that fails for any reason, even a cancelled ctx, is
// dead-lettered as a new record with Redrives one higher and RedriveOf set
// to the old ID, by r's sink or, when r has none, by src. To tune those
// records (WithDeadLetterErrors, WithDeadLetterTimeout), give r
// WithDeadLetter(src) as well: without a sink New refuses them. When no sink
// stores it, the replay's error (matching [ErrDeadLetterNotRecorded]) is
// joined into Redrive's error and the next record is replayed.
//
// Redrive stops early, with an error, when listing or claiming fails or
// ctx is done. Bad arguments give an error wrapping [ErrInvalidOption].
func Redrive(ctx context.Context, src RedriveSource, r *Retrier, handler func(context.Context, DeadLetter) error, filter func(DeadLetter) bool) (RedriveReport, error) {
	var rep RedriveReport
	switch {
	case ctx == nil:
		return rep, fmt.Errorf("%w: Redrive: the context is nil; use context.Background()", ErrInvalidOption)
	case isnil.Is(src):
		return rep, fmt.Errorf("%w: Redrive: the source is nil", ErrInvalidOption)
	case r == nil:
		return rep, fmt.Errorf("%w: Redrive: the *Retrier is nil; build one with New", ErrInvalidOption)
	case handler == nil:
		return rep, fmt.Errorf("%w: Redrive: the handler is nil", ErrInvalidOption)
	}
	pending, err := src.Pending(ctx)
	if err != nil {
		return rep, fmt.Errorf("retry: redrive: listing dead letters: %w", err)
	}
	if filter != nil {
		pending = slices.DeleteFunc(pending, func(dl DeadLetter) bool { return !filter(dl) })
	}
	rep.Pending = len(pending)
	var lost []error
	for _, dl := range pending {
		if err := context.Cause(ctx); err != nil {
			return rep, errors.Join(append(lost, err)...)
		}
		ok, err := src.Claim(ctx, dl.ID)
		if err != nil {
			return rep, errors.Join(append(lost, fmt.Errorf("retry: redrive: claiming %s: %w", dl.ID, err))...)
		}
		if !ok {
			rep.Skipped++
			continue
		}
		switch err := replay(ctx, src, r, handler, dl); {
		case err == nil:
			rep.Succeeded++
		case errors.Is(err, ErrDeadLetterNotRecorded):
			rep.NotRecorded++
			lost = append(lost, fmt.Errorf("retry: redrive of %s: %w", dl.ID, err))
		default:
			rep.Failed++
		}
	}
	return rep, errors.Join(lost...)
}

// replay runs one claimed record through r.
func replay(ctx context.Context, src RedriveSource, r *Retrier, handler func(context.Context, DeadLetter) error, dl DeadLetter) error {
	rr, err := r.With(WithName(dl.Name), WithPayload(dl.Payload), redriveOf(dl, src))
	if err != nil {
		return err
	}
	if dl.IdempotencyKey != "" && rr.c.idem != nil {
		// The context's key wins over any other, so the replay runs
		// under the record's key whatever ctx carries.
		ctx = ContextWithIdempotencyKey(ctx, dl.IdempotencyKey)
	}
	return rr.Do(ctx, func(ctx context.Context) error { return handler(ctx, dl) })
}

// redriveOf makes a replay of dl dead-letter every failure, into src when
// no sink is configured, as a record that points back to dl. A record
// without an idempotency key is replayed without idempotency: sharing r's
// default key among unrelated records would be wrong. It drops all of
// r's idempotency settings, not just the store, so that they are not
// taken for tuning options without a store.
func redriveOf(dl DeadLetter, src RedriveSource) Option {
	return func(c *config) {
		d := c.deadLetters()
		if d.sink == nil {
			d.sink = src
		}
		d.on, d.onSet = 1<<OutcomePermanent|1<<OutcomeExhausted|1<<OutcomeMaxElapsed|1<<OutcomeDeadline|1<<OutcomeCanceled, true
		d.origin = &dl
		if dl.IdempotencyKey == "" {
			c.idem = nil
		}
	}
}
