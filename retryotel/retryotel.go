// Package retryotel reports the events of github.com/steadfast-go/retry to
// OpenTelemetry: metrics through a MeterProvider, and events on the span in
// each call's context.
//
//	obs, err := retryotel.New(provider, retryotel.Options{})
//	r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs))
//
// The metrics are the same as retryprom's, named the OpenTelemetry way:
//
//	retry.calls               counter {call}: calls ended; retry.operation, retry.outcome
//	retry.attempts            counter {attempt}: attempts, first attempts included; retry.operation
//	retry.retries             counter {attempt}: attempts after the first of their call; retry.operation
//	retry.calls.in_flight     up-down counter {call}: calls between their first attempt and their end
//	retry.waits.in_progress   up-down counter {call}: calls waiting before their next attempt
//	retry.dead_letters        counter {call}: dead letters; retry.operation, retry.dead_letter.result (recorded, failed)
//	retry.refusals            counter {call}: refused calls; retry.operation, retry.refused_by (budget, breaker, limit, rate, pause)
//	retry.call.attempts       histogram {attempt}: attempts per call; buckets 1, 2, 3, 4, 5, 10, 100, 1000
//	retry.call.duration       histogram s: from the start of Do to its return, waits included
//
// With retry.WithIdempotency an attempt may end without calling fn (the key
// is held by another caller, or the store failed); retry.attempts counts it
// all the same. retry.outcome is one of success, permanent, exhausted,
// max-elapsed, deadline, canceled, refused, unknown and handed-off (see
// retry.OutcomeRefused: a breaker, a retry budget, a concurrency limit, a
// rate limit or a pause stopped the call; retry.OutcomeUnknown: the
// context ended while an attempt ran; retry.OutcomeHandedOff: not a
// failure). A refused call also counts in retry.refusals, retry.refused_by
// the first of budget, breaker, limit, rate and pause whose error
// (overload.ErrBudgetExhausted, ErrCircuitOpen, ErrLimitExceeded,
// ErrRateLimited, ErrPaused) its error matches (overload.RefuserOf); one
// that matches none counts in retry.calls only. The retry.calls, retry.dead_letters
// and retry.refusals series of an operation all exist, at 0, from its
// first event. The two up-down counters follow the rule in the
// [retry.Observer] doc, as retryprom's gauges and retrystats' do.
//
// # Spans
//
// When the context passed to Do holds a recording span, the observer adds
// an event "retry" for each retry (retry.operation, retry.attempt — the
// attempt that failed —, retry.delay in seconds, error.message) and an
// event "retry.done" when the call ends (retry.operation, retry.outcome,
// retry.refused_by when it was refused, as on retry.refusals,
// retry.attempts, retry.elapsed in seconds, error.message when it failed,
// retry.dead_letter when it was dead-lettered). It does not set the
// span's status: the span is the caller's. Error texts are recorded as
// they are; payloads and keys never, since the events carry none.
//
// # Concurrency limits
//
// [RegisterLimit] reports the figures of one concurrency limit
// (retry.OverloadOptions.Limit, such as an *overload.Adaptive), read
// from its Stats at each collection, as retryprom's LimitCollector does:
//
//	retry.concurrency_limit           up-down counter {attempt}: attempts the limit lets in flight
//	retry.concurrency_limit.in_flight up-down counter {attempt}: attempts holding a permit
//	retry.concurrency_limit.queued    up-down counter {attempt}: first attempts waiting for a permit
//	retry.concurrency_limit.refused   counter {attempt}: attempts refused since the limit was built
//
// each with retry.downstream, the name it is registered under, one per
// limit however many operations share it. A refused attempt that is not
// a hedge also ends its call, which retry.refusals counts with
// retry.refused_by "limit" under the call's operation.
//
// # Cardinality
//
// The retry.operation metric attribute is bounded as in retryprom: the
// first [Options.MaxOperations] distinct names (default 100) keep their
// own; later names, names that are not valid UTF-8 and names longer than
// [retrymetrics.MaxNameLen] (128) bytes are reported as "other", and calls
// without a name as "unnamed". Span events carry the name as given.
package retryotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/steadfast-go/retry/retryotel"

// DefaultMaxOperations (100) is the number of distinct operation names
// reported as themselves when [Options.MaxOperations] is 0.
const DefaultMaxOperations = retrymetrics.DefaultMaxOperations

// Attribute keys of the metrics and span events.
const (
	// OperationKey holds the operation's name, bounded on metrics.
	OperationKey = attribute.Key("retry.operation")
	// OutcomeKey holds the call's outcome, as Outcome.String gives it.
	OutcomeKey = attribute.Key("retry.outcome")
	// DeadLetterResultKey holds "recorded" or "failed" on retry.dead_letters.
	DeadLetterResultKey = attribute.Key("retry.dead_letter.result")
	// RefusedByKey holds who refused a call, "budget", "breaker",
	// "limit", "rate" or "pause", on retry.refusals and a refused call's
	// retry.done event.
	RefusedByKey = attribute.Key("retry.refused_by")
	// DownstreamKey holds the name of the downstream a concurrency limit
	// guards, on the limit's figures ([RegisterLimit]).
	DownstreamKey = attribute.Key("retry.downstream")
)

// Options configures [New]. The zero value gives the defaults.
// MaxOperations and DurationBuckets mean the same as in retryprom's Options.
type Options struct {
	// MaxOperations is how many distinct operation names keep their own
	// retry.operation value; the rest count as "other". It must not be
	// negative. Default (0): DefaultMaxOperations.
	MaxOperations int
	// DurationBuckets are the bucket bounds, in seconds, finite and
	// increasing, of retry.call.duration (a last bucket counts longer
	// calls). Default: 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
	// 2.5, 5, 10, 30, 60. New copies the slice.
	DurationBuckets []float64
}

// outcomes are the retry.outcome values, indexed by retry.Outcome.
var outcomes = retrymetrics.OutcomeLabels(retry.OutcomeHandedOff)

// refusers are who may refuse a call, in the order of the retry.refused_by
// values: refusers[i] is overload.Refuser(i+1), so refuserOf gives the
// index.
var refusers = [...]overload.Refuser{overload.RefusedByBudget, overload.RefusedByBreaker, overload.RefusedByLimit,
	overload.RefusedByRate, overload.RefusedByPause}

// refuserOf returns the index in refusers of who refused a call with err,
// or -1 for none (overload.RefuserOf). A refuser that a newer retry module
// adds, and this one does not know, counts as none rather than panic.
func refuserOf(err error) int {
	if i := int(overload.RefuserOf(err)) - 1; i < len(refusers) {
		return i
	}
	return -1
}

// Observer is a retry.Observer that records OpenTelemetry metrics and span
// events. Build one with [New]; the zero value is not usable. An Observer
// is safe for concurrent use.
type Observer struct {
	calls, attempts, retries metric.Int64Counter
	inFlight, waiting        metric.Int64UpDownCounter
	deadLetters, refusals    metric.Int64Counter
	perCall                  metric.Int64Histogram
	duration                 metric.Float64Histogram

	ops *retrymetrics.Table[*series]
}

// series holds the attribute options of one operation, built once so that
// recording allocates nothing.
type series struct {
	add      []metric.AddOption
	record   []metric.RecordOption
	outcome  [][]metric.AddOption // indexed like outcomes
	recorded []metric.AddOption
	failed   []metric.AddOption
	refusals [len(refusers)][]metric.AddOption
}

// New returns an Observer whose instruments come from the meter
// [ScopeName] of mp; pass otel.GetMeterProvider() for the global provider.
// The error wraps retry.ErrInvalidOption for a nil mp (or one holding a
// nil pointer, such as a nil *sdkmetric.MeterProvider) or bad options, or
// is the meter's error for an instrument it could not make.
func New(mp metric.MeterProvider, opts Options) (*Observer, error) {
	o := &Observer{}
	ops, buckets, err := retrymetrics.Prepare(retrymetrics.Setup{
		On: mp, OnName: "the meter provider", OnHint: "pass otel.GetMeterProvider() for the global one",
		MaxOperations: opts.MaxOperations, DurationBuckets: opts.DurationBuckets,
	}, o.newSeries)
	if err != nil {
		return nil, fmt.Errorf("%w: retryotel.New: %w", retry.ErrInvalidOption, err)
	}
	m := mp.Meter(ScopeName)

	var errs [9]error
	o.calls, errs[0] = m.Int64Counter("retry.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls ended, by outcome."))
	o.attempts, errs[1] = m.Int64Counter("retry.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made, first attempts included."))
	o.retries, errs[2] = m.Int64Counter("retry.retries", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts after the first of their call."))
	o.inFlight, errs[3] = m.Int64UpDownCounter("retry.calls.in_flight", metric.WithUnit("{call}"),
		metric.WithDescription("Calls between their first attempt and their end."))
	o.waiting, errs[4] = m.Int64UpDownCounter("retry.waits.in_progress", metric.WithUnit("{call}"),
		metric.WithDescription("Calls waiting before their next attempt."))
	o.deadLetters, errs[5] = m.Int64Counter("retry.dead_letters", metric.WithUnit("{call}"),
		metric.WithDescription("Dead letters of failed calls, by result: recorded by a sink, or failed in every sink."))
	o.perCall, errs[6] = m.Int64Histogram("retry.call.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts per ended call."),
		metric.WithExplicitBucketBoundaries(retrymetrics.AttemptBuckets()...))
	o.duration, errs[7] = m.Float64Histogram("retry.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the start of a call to its end, waits included."),
		metric.WithExplicitBucketBoundaries(buckets...))
	o.refusals, errs[8] = m.Int64Counter("retry.refusals", metric.WithUnit("{call}"),
		metric.WithDescription("Refused calls, by who refused them: a retry budget, a circuit breaker, a concurrency limit, a rate limit or a pause."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("retryotel: making the instruments: %w", err)
	}
	o.ops = ops
	return o, nil
}

// newSeries builds the options of an operation, and adds 0 to each of
// its outcome, dead-letter and refusal series so that they exist before
// their first event, as retryprom's do.
func (o *Observer) newSeries(label string) *series {
	op := OperationKey.String(label)
	set := metric.WithAttributeSet(attribute.NewSet(op))
	s := &series{
		add:      []metric.AddOption{set},
		record:   []metric.RecordOption{set},
		outcome:  make([][]metric.AddOption, len(outcomes)),
		recorded: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op, DeadLetterResultKey.String("recorded")))},
		failed:   []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op, DeadLetterResultKey.String("failed")))},
	}
	ctx := context.Background()
	for i, oc := range outcomes {
		s.outcome[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op, OutcomeKey.String(oc)))}
		o.calls.Add(ctx, 0, s.outcome[i]...)
	}
	o.deadLetters.Add(ctx, 0, s.recorded...)
	o.deadLetters.Add(ctx, 0, s.failed...)
	for i, by := range refusers {
		s.refusals[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op, RefusedByKey.String(by.String())))}
		o.refusals.Add(ctx, 0, s.refusals[i]...)
	}
	return s
}

// OnAttemptStart counts the attempt.
func (o *Observer) OnAttemptStart(ctx context.Context, e retry.AttemptStart) {
	s := o.ops.Get(e.Name)
	o.attempts.Add(ctx, 1, s.add...)
	if e.Attempt == 1 {
		o.inFlight.Add(ctx, 1, s.add...)
	} else {
		o.retries.Add(ctx, 1, s.add...)
	}
}

// OnAttemptEnd does nothing: attempts are counted as they start.
func (o *Observer) OnAttemptEnd(context.Context, retry.AttemptEnd) {}

// OnRetry counts a wait in progress when the retry has a delay, and adds a
// "retry" event to the span in ctx.
func (o *Observer) OnRetry(ctx context.Context, e retry.Scheduled) {
	if e.Delay > 0 {
		o.waiting.Add(ctx, 1, o.ops.Get(e.Name).add...)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := []attribute.KeyValue{
			OperationKey.String(e.Name),
			attribute.Int("retry.attempt", e.Attempt),
			attribute.Float64("retry.delay", e.Delay.Seconds()),
		}
		if e.Err != nil {
			attrs = append(attrs, attribute.String("error.message", e.Err.Error()))
		}
		span.AddEvent("retry", trace.WithAttributes(attrs...))
	}
}

// OnWaitEnd ends the wait in progress that OnRetry counted.
func (o *Observer) OnWaitEnd(ctx context.Context, e retry.WaitEnd) {
	o.waiting.Add(ctx, -1, o.ops.Get(e.Name).add...)
}

// OnDone counts the call's outcome, who refused it, its attempts,
// duration and dead letter, and adds a "retry.done" event to the span in
// ctx.
func (o *Observer) OnDone(ctx context.Context, e retry.Done) {
	s := o.ops.Get(e.Name)
	if int(e.Outcome) < len(s.outcome) {
		o.calls.Add(ctx, 1, s.outcome[e.Outcome]...)
	}
	refuser := -1
	if e.Outcome == retry.OutcomeRefused {
		if refuser = refuserOf(e.Err); refuser >= 0 {
			o.refusals.Add(ctx, 1, s.refusals[refuser]...)
		}
	}
	if e.Attempts > 0 {
		o.inFlight.Add(ctx, -1, s.add...)
	}
	switch {
	case e.DeadLettered:
		o.deadLetters.Add(ctx, 1, s.recorded...)
	case e.DeadLetterFailed:
		o.deadLetters.Add(ctx, 1, s.failed...)
	}
	o.perCall.Record(ctx, int64(e.Attempts), s.record...)
	o.duration.Record(ctx, e.Elapsed.Seconds(), s.record...)

	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 7) // room for every attribute below
		attrs = append(attrs, OperationKey.String(e.Name), OutcomeKey.String(e.Outcome.String()))
		if refuser >= 0 {
			attrs = append(attrs, RefusedByKey.String(refusers[refuser].String()))
		}
		attrs = append(attrs,
			attribute.Int("retry.attempts", e.Attempts),
			attribute.Float64("retry.elapsed", e.Elapsed.Seconds()))
		switch {
		case e.DeadLettered:
			attrs = append(attrs, attribute.String("retry.dead_letter", "recorded"))
		case e.DeadLetterFailed:
			attrs = append(attrs, attribute.String("retry.dead_letter", "failed"))
		}
		if e.Err != nil {
			attrs = append(attrs, attribute.String("error.message", e.Err.Error()))
		}
		span.AddEvent("retry.done", trace.WithAttributes(attrs...))
	}
}
