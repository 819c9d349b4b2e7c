package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/isnil"
)

// Source is a store of dead letters that [Redrive] can replay, as
// [FileSink], [MemorySink] and module pgdeadletter's sink are. Its methods
// must be safe for concurrent use.
type Source interface {
	// DeadLetterSink is where a replay that fails again is recorded, as
	// a new record, when the Retrier given to Redrive has no sink.
	retry.DeadLetterSink
	// Pending returns the records not yet marked as redriven, oldest
	// first.
	Pending(ctx context.Context) ([]retry.DeadLetter, error)
	// MarkRedriven marks the record id as redriven, durably, before it is
	// replayed. It must be atomic: for each id it returns true to at most
	// one caller ever, from any goroutine (and, for shared stores, any
	// process), and false when the record was already marked or is
	// unknown.
	MarkRedriven(ctx context.Context, id string) (bool, error)
}

// PendingScanner is a [Source] that passes its pending records one at a
// time, as [FileSink] does; [Redrive] then uses ScanPending, not Pending,
// with the same records and Report. A type that embeds one and changes
// Pending must change ScanPending to match.
type PendingScanner interface {
	Source
	// ScanPending calls fn with each record that Pending would return,
	// in the same order. Which records those are is settled before fn
	// is first called, as for Pending's slice: a record marked or stored
	// meanwhile (by fn, say) is passed, or not, as it would be in that
	// slice. fn may call the source's methods. When fn returns an error,
	// ScanPending stops and returns it. It returns an error of its own
	// when ctx is done before it starts or the records cannot be read;
	// once it passes records it should pass them all, whatever ctx says,
	// since Redrive counts them in Report.Pending even after it stopped
	// early.
	ScanPending(ctx context.Context, fn func(retry.DeadLetter) error) error
}

// Report says what a call of [Redrive] did. Each of the Pending records
// is counted in at most one of the other fields, and in exactly one
// unless Redrive stopped early.
type Report struct {
	Pending   int // pending records the filter accepted
	Skipped   int // of those, marked by another redrive first
	Succeeded int // replays that succeeded
	// Failed counts replays that failed again: dead-lettered anew, but
	// for one that lost to another holder of the record's key, whose work
	// it is (see [retry.Retrier.ForRedrive]).
	Failed int
	// Replayed counts the replays that ended on a failure replayed from
	// an idempotency store (matching [retry.ErrReplayed]), dead-lettered
	// anew: the record's key holds a stored failure, so the replay did
	// not run the work. Redrive such records with a Retrier without
	// [retry.WithIdempotency], or once the store no longer keeps the key.
	Replayed    int
	NotRecorded int // replays that failed again and whose new dead letter no sink stored
	// Invalid counts the records left pending, not marked nor replayed,
	// because r cannot replay them as they are (an idempotency key Do
	// would refuse, say); Redrive's error says why for each.
	Invalid int
}

// Redrive replays the pending dead letters of src that filter accepts (nil
// accepts all), oldest first, each through r with handler as the
// operation, marking each redriven first; see the package doc's Redriving
// section for keys, failures and records r cannot replay. filter is called
// once per pending record, in order (as Redrive reaches it, for a
// [PendingScanner]). A nil r is the zero retry.Retrier. Redrive stops
// early, with an error,
// when listing or marking fails or ctx is done; bad arguments give an
// error wrapping [retry.ErrInvalidOption].
func Redrive(ctx context.Context, src Source, r *retry.Retrier, handler func(context.Context, retry.DeadLetter) error, filter func(retry.DeadLetter) bool) (Report, error) {
	var rep Report
	switch {
	case ctx == nil:
		return rep, fmt.Errorf("%w: Redrive: the context is nil; use context.Background()", retry.ErrInvalidOption)
	case isnil.Is(src):
		return rep, fmt.Errorf("%w: Redrive: the source is nil", retry.ErrInvalidOption)
	case handler == nil:
		return rep, fmt.Errorf("%w: Redrive: the handler is nil", retry.ErrInvalidOption)
	}
	d := redriver{ctx: ctx, src: src, r: r, handler: handler}
	if sc, ok := src.(PendingScanner); ok {
		return d.scan(sc, filter)
	}
	pending, err := src.Pending(ctx)
	if err != nil {
		return d.rep, fmt.Errorf("deadletter: redrive: listing dead letters: %w", err)
	}
	if filter != nil {
		pending = slices.DeleteFunc(pending, func(dl retry.DeadLetter) bool { return !filter(dl) })
	}
	d.rep.Pending = len(pending)
	for _, dl := range pending {
		if err := d.one(dl); err != nil {
			return d.rep, errors.Join(append(d.lost, err)...)
		}
	}
	return d.rep, errors.Join(d.lost...)
}

// redriver is a call of Redrive under way.
type redriver struct {
	ctx     context.Context
	src     Source
	r       *retry.Retrier
	handler func(context.Context, retry.DeadLetter) error
	rep     Report
	lost    []error // the errors of the records that did not stop Redrive
}

// scan is Redrive of a PendingScanner, sc (d.src), one record at a time.
// It ends as Redrive of the slice of Pending would, with the same report:
// once Redrive stops early, the rest of the records are only counted,
// filter permitting, in Report.Pending.
func (d *redriver) scan(sc PendingScanner, filter func(retry.DeadLetter) bool) (Report, error) {
	var stop error // what stopped Redrive early
	err := sc.ScanPending(d.ctx, func(dl retry.DeadLetter) error {
		if filter != nil && !filter(dl) {
			return nil
		}
		d.rep.Pending++
		if stop == nil {
			stop = d.one(dl)
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("deadletter: redrive: listing dead letters: %w", err)
	}
	return d.rep, errors.Join(append(d.lost, stop, err)...)
}

// one replays dl, a pending record the filter accepted, and counts it in
// d.rep. It returns the error that stops Redrive, if any; the errors of
// the records that do not stop it go to d.lost.
func (d *redriver) one(dl retry.DeadLetter) error {
	if err := context.Cause(d.ctx); err != nil {
		return err
	}
	// Built before the mark: a record r cannot replay stays pending
	// rather than be marked and lost.
	rr, err := d.r.ForRedrive(dl, d.src)
	if err != nil {
		d.rep.Invalid++
		d.lost = append(d.lost, fmt.Errorf("deadletter: redrive of %s: left pending: %w", dl.ID, err))
		return nil
	}
	ok, err := d.src.MarkRedriven(d.ctx, dl.ID)
	if err != nil {
		return fmt.Errorf("deadletter: redrive: marking %s: %w", dl.ID, err)
	}
	if !ok {
		d.rep.Skipped++
		return nil
	}
	switch err := replay(d.ctx, rr, d.handler, dl); {
	case err == nil:
		d.rep.Succeeded++
	case errors.Is(err, retry.ErrInvalidOption) && !errors.As(err, new(*retry.Error)):
		// Refused before any attempt, so no new record holds it:
		// ForRedrive should have caught this. Never silent.
		d.rep.NotRecorded++
		d.lost = append(d.lost, fmt.Errorf("deadletter: redrive of %s: marked but not replayed: %w", dl.ID, err))
	case errors.Is(err, retry.ErrDeadLetterNotRecorded):
		d.rep.NotRecorded++
		d.lost = append(d.lost, fmt.Errorf("deadletter: redrive of %s: %w", dl.ID, err))
	case errors.Is(err, retry.ErrReplayed):
		d.rep.Replayed++
	default:
		d.rep.Failed++
	}
	return nil
}

// replay runs one marked record through rr, r.ForRedrive(dl, src).
func replay(ctx context.Context, rr *retry.Retrier, handler func(context.Context, retry.DeadLetter) error, dl retry.DeadLetter) error {
	if dl.IdempotencyKey != "" {
		// The context's key wins over any other, so the replay runs
		// under the record's key whatever ctx carries. Without a store
		// it does nothing.
		ctx = retry.ContextWithIdempotencyKey(ctx, dl.IdempotencyKey)
	}
	return rr.Do(ctx, func(ctx context.Context) error { return handler(ctx, dl) })
}
