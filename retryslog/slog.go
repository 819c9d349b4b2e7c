// Package retryslog logs the calls of a [retry.Retrier] with log/slog:
// retries, give-ups and dead letters that no sink stored.
//
// # Records
//
// The observer of [New] logs:
//
//   - each retry at Options.RetryLevel: "retry: attempt failed, retrying",
//     with operation, attempt, delay and error;
//   - a success after retries at RetryLevel: "retry: succeeded";
//   - a permanent failure at Warn, a call stopped by its context's
//     deadline at Warn, attempts exhausted, the time budget spent or a
//     call refused by a budget, a breaker, a concurrency limit, a rate
//     limit or a pause at Error: "retry: gave up", with operation,
//     outcome, attempts, elapsed and error; a refused call also has
//     refused_by, "budget", "breaker", "limit", "rate" or "pause", when
//     its error matches overload.ErrBudgetExhausted,
//     overload.ErrCircuitOpen, overload.ErrLimitExceeded,
//     overload.ErrRateLimited or overload.ErrPaused (the first it
//     matches, in that order: overload.RefuserOf);
//   - a cancelled call at RetryLevel: "retry: cancelled";
//   - a dead letter that no sink stored at Error, whatever the outcome,
//     with dead_letter=failed, since the work may be lost.
//
// A first-try success logs nothing, and neither does the end of a wait
// (OnWaitEnd): the retry's record announced the wait, and a record of the
// next retry or of the call's end always follows it. Errors are logged
// with their text as is: keep secrets out of error messages. A call's
// partition (overload.WithPartition), which may name a tenant or a host,
// is not logged.
//
// # Cost
//
// The observer checks logger.Enabled before it builds a record, so a
// level that is off costs no record.
package retryslog

import (
	"context"
	"log/slog"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// Options configures [New]. The zero value, like a nil *Options, logs
// retries at Info and adds no caller attributes.
type Options struct {
	// RetryLevel is the level of the record for each retry, for a success
	// that took more than one attempt, and for a cancelled call. Default
	// (the zero value): slog.LevelInfo. Use slog.LevelDebug to keep
	// retries out of production logs.
	RetryLevel slog.Level

	// Attrs, when set, returns attributes to add to every record, such as
	// a request ID or an idempotency key taken from ctx. It is the only
	// way caller data gets into these logs: the events carry no payload
	// or key, and the observer logs nothing but the operation's name,
	// numbers, durations and errors. Attrs is called only for records
	// that the logger will write, from Do's goroutine; it must be safe
	// for concurrent use.
	Attrs func(ctx context.Context) []slog.Attr
}

// New returns a [retry.Observer] that logs retries, give-ups and
// unrecorded dead letters to logger, as the package doc's Records section
// lists. A nil logger means slog.Default() as it is when New is called;
// opts may be nil. The observer is safe for concurrent use.
func New(logger *slog.Logger, opts *Options) retry.Observer {
	if logger == nil {
		logger = slog.Default()
	}
	o := &slogObserver{log: logger}
	if opts != nil {
		o.opts = *opts
	}
	return o
}

type slogObserver struct {
	log  *slog.Logger
	opts Options
}

func (o *slogObserver) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (o *slogObserver) OnAttemptEnd(context.Context, retry.AttemptEnd)     {}
func (o *slogObserver) OnWaitEnd(context.Context, retry.WaitEnd)           {}

func (o *slogObserver) OnRetry(ctx context.Context, e retry.Scheduled) {
	if !o.log.Enabled(ctx, o.opts.RetryLevel) {
		return
	}
	o.write(ctx, o.opts.RetryLevel, "retry: attempt failed, retrying",
		slog.String("operation", e.Name),
		slog.Int("attempt", e.Attempt),
		slog.Duration("delay", e.Delay),
		slog.Any("error", e.Err))
}

func (o *slogObserver) OnDone(ctx context.Context, e retry.Done) {
	level, msg := o.opts.RetryLevel, "retry: gave up"
	switch e.Outcome {
	case retry.OutcomeSuccess:
		if e.Attempts <= 1 {
			return
		}
		msg = "retry: succeeded"
	case retry.OutcomeCanceled:
		msg = "retry: cancelled"
	case retry.OutcomeHandedOff:
		level, msg = slog.LevelInfo, "retry: handed off" // not a failure: the work goes on elsewhere
	case retry.OutcomePermanent, retry.OutcomeDeadline:
		level = slog.LevelWarn
	default:
		level = slog.LevelError
	}
	if e.DeadLetterFailed {
		level = max(level, slog.LevelError)
	}
	if !o.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 7) // room for every attribute below
	attrs = append(attrs, slog.String("operation", e.Name), slog.String("outcome", e.Outcome.String()))
	if by := refusedBy(e); by != "" {
		attrs = append(attrs, slog.String("refused_by", by))
	}
	attrs = append(attrs, slog.Int("attempts", e.Attempts), slog.Duration("elapsed", e.Elapsed))
	switch {
	case e.DeadLettered:
		attrs = append(attrs, slog.String("dead_letter", "recorded"))
	case e.DeadLetterFailed:
		attrs = append(attrs, slog.String("dead_letter", "failed"))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("error", e.Err))
	}
	o.write(ctx, level, msg, attrs...)
}

// refusedBy names who refused a refused call, or returns "" for another
// outcome or a refusal that matches none of the overload package's.
func refusedBy(e retry.Done) string {
	if e.Outcome != retry.OutcomeRefused {
		return ""
	}
	return overload.RefuserOf(e.Err).String()
}

// write logs one record, with the caller's attributes if it opted in.
func (o *slogObserver) write(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if o.opts.Attrs != nil {
		attrs = append(attrs, o.opts.Attrs(ctx)...)
	}
	o.log.LogAttrs(ctx, level, msg, attrs...)
}
