// Package retryprom exports the events of github.com/steadfast-go/retry as
// Prometheus metrics, per operation:
//
//	obs, err := retryprom.New(registry, retryprom.Options{})
//	r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs))
//
// With the default namespace "retry" the metrics are:
//
//	retry_calls_total{operation, outcome}        counter: calls ended, by outcome
//	retry_attempts_total{operation}              counter: attempts, first attempts included (*)
//	retry_retries_total{operation}               counter: attempts after the first of their call
//	retry_calls_in_flight{operation}             gauge: calls between their first attempt and their end
//	retry_waits_in_progress{operation}           gauge: calls waiting before their next attempt
//	retry_dead_letters_total{operation, result}  counter: dead letters, result "recorded" or "failed"
//	retry_refusals_total{operation, refused_by}  counter: refused calls, by who refused them
//	retry_attempts_per_call{operation}           histogram: attempts per call; buckets 1, 2, 3, 4, 5, 10, 100, 1000
//	retry_call_duration_seconds{operation}       histogram: from Do's start to its return
//
// (*) With retry.WithIdempotency an attempt may end without calling fn (the
// key is held by another caller, or the store failed); it counts all the
// same.
//
// The outcome label is one of success, permanent, exhausted, max-elapsed,
// deadline, canceled, refused, unknown and handed-off (see
// retry.OutcomeRefused, retry.OutcomeUnknown and retry.OutcomeHandedOff:
// a handed-off call has not failed, its work goes on in a queue).
//
// A refused call also counts in retry_refusals_total, with refused_by
// "budget", "breaker", "limit", "rate" or "pause" when its error matches
// overload.ErrBudgetExhausted, overload.ErrCircuitOpen,
// overload.ErrLimitExceeded, overload.ErrRateLimited or
// overload.ErrPaused (the first it matches, in that order:
// overload.RefuserOf); one that matches none (a guard of one's own with
// errors of its own) counts in outcome="refused" only. A concurrency
// limit's own figures are a [LimitCollector]'s.
//
// Every outcome's series, both dead-letter series and the five refusal
// series exist at 0 from the first event of an operation in the process,
// so rate() and increase() see a failure once a scrape has seen its
// series at 0. A failure before the series' first scrape (within one
// scrape interval of the operation's first event, as in a new process
// whose first call fails) makes a series that starts above 0, and rate()
// and increase() take that first sample as their baseline: they miss it.
// The alert RetryDeadLetterNotRecorded counts such a series as well.
//
// The two gauges follow the rule in the [retry.Observer] doc, as
// retryotel's and retrystats' do.
//
// # Cardinality
//
// The operation label holds the name given with retry.WithName. Only the
// first [Options.MaxOperations] distinct names (default 100) get their
// own series; later names are counted under operation="other", so an
// unexpected name cannot blow up the number of series. A call without a
// name is counted under operation="unnamed". Names that are not valid
// UTF-8 count under "other". All of these count toward the limit. Names
// longer than [retrymetrics.MaxNameLen] (128) bytes count under "other"
// too, without counting toward the limit, so that no label value is
// longer than that: a longer name is most likely data, not an operation,
// and would exceed a scrape's label_value_length_limit or hold a secret.
//
// With the default duration buckets each operation has 48 series (20
// counters and gauges, 11 for the attempts histogram, 17 for the duration
// histogram), so there are at most 48 × (MaxOperations + 1) in all: 4848
// by default.
//
// # Concurrency limits
//
// A [LimitCollector] ([NewLimitCollector]) exports the figures of one
// concurrency limit (retry.OverloadOptions.Limit, such as an
// *overload.Adaptive), read from its Stats at each scrape:
//
//	retry_concurrency_limit{downstream}                gauge: attempts the limit lets in flight
//	retry_concurrency_limit_in_flight{downstream}      gauge: attempts holding a permit
//	retry_concurrency_limit_queued{downstream}         gauge: first attempts waiting for a permit
//	retry_concurrency_limit_refused_total{downstream}  counter: attempts refused since the limit was built
//
// downstream is the name it is built with, one per limit: four series
// a limit, however many operations share it. A refused attempt that is
// not a hedge also ends its call, which retry_refusals_total counts with
// refused_by="limit" under the call's operation.
//
// The alerts in alerts/retry.rules.yml use these metrics; see
// alerts/retry.tests.yml for what they fire on.
package retryprom

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
)

// Operation names used in place of a call's own name.
const (
	// OtherOperation ("other") is the operation label of calls whose name
	// came after the limit of distinct names was reached, is not valid
	// UTF-8, or is longer than retrymetrics.MaxNameLen bytes.
	OtherOperation = retrymetrics.Other
	// UnnamedOperation ("unnamed") is the operation label of calls
	// without a name.
	UnnamedOperation = retrymetrics.Unnamed
)

// DefaultMaxOperations (100) is the number of distinct operation names
// that get their own series when [Options.MaxOperations] is 0.
const DefaultMaxOperations = retrymetrics.DefaultMaxOperations

// Options configures [New]. The zero value gives the defaults.
// MaxOperations and DurationBuckets mean the same as in retryotel's Options.
type Options struct {
	// Namespace is the prefix of every metric name: letters, digits, _
	// and :, not starting with a digit. Default: "retry". The alert rules
	// assume the default.
	Namespace string
	// MaxOperations is how many distinct operation names get their own
	// series; the rest count as "other". It must not be negative.
	// Default (0): DefaultMaxOperations.
	MaxOperations int
	// DurationBuckets are the upper bounds, in seconds, finite and
	// increasing, of the call-duration histogram (Prometheus adds the +Inf
	// bucket itself). Default: 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
	// 0.5, 1, 2.5, 5, 10, 30, 60. New copies the slice.
	DurationBuckets []float64
}

// outcomes are the outcome label values, indexed by retry.Outcome.
var outcomes = retrymetrics.OutcomeLabels(retry.OutcomeHandedOff)

// refusers are who may refuse a call, in the order of the refused_by label
// values: refusers[i] is overload.Refuser(i+1), so refuserOf gives the index.
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

// Observer is a retry.Observer that updates Prometheus metrics, and a
// prometheus.Collector of them. Build one with [New]; the zero value is
// not usable. An Observer is safe for concurrent use; it takes a lock of
// its own only the first time it sees an operation name, to create the
// operation's series.
type Observer struct {
	calls      *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	retries    *prometheus.CounterVec
	inFlight   *prometheus.GaugeVec
	waiting    *prometheus.GaugeVec
	deadLetter *prometheus.CounterVec
	refusals   *prometheus.CounterVec
	perCall    *prometheus.HistogramVec
	duration   *prometheus.HistogramVec

	ops *retrymetrics.Table[*series]
}

// series are the metrics of one operation.
type series struct {
	calls                []prometheus.Counter // indexed like outcomes
	attempts, retries    prometheus.Counter
	inFlight, waiting    prometheus.Gauge
	dlRecorded, dlFailed prometheus.Counter
	refusals             [len(refusers)]prometheus.Counter
	perCall, duration    prometheus.Observer
}

// New returns an Observer whose metrics are registered on reg. The error
// wraps retry.ErrInvalidOption for a nil reg (or one holding a nil
// pointer, such as a nil *prometheus.Registry) or bad options, and is the
// registry's error (such as prometheus.AlreadyRegisteredError when reg
// already has metrics of these names) if registration fails; then nothing
// is registered.
func New(reg prometheus.Registerer, opts Options) (*Observer, error) {
	o := &Observer{}
	ops, buckets, err := retrymetrics.Prepare(retrymetrics.Setup{
		On: reg, OnName: "the registerer",
		MaxOperations: opts.MaxOperations, DurationBuckets: opts.DurationBuckets,
	}, o.newSeries)
	if err != nil {
		return nil, fmt.Errorf("%w: retryprom.New: %w", retry.ErrInvalidOption, err)
	}
	ns := opts.Namespace
	if ns == "" {
		ns = "retry"
	}
	if !validName(ns) {
		return nil, fmt.Errorf("%w: retryprom.New: Namespace %q must be letters, digits, _ and :, not starting with a digit", retry.ErrInvalidOption, ns)
	}
	op := []string{"operation"}
	o.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "calls_total",
		Help: "Calls ended, by outcome."}, []string{"operation", "outcome"})
	o.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "attempts_total",
		Help: "Attempts made, first attempts included."}, op)
	o.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "retries_total",
		Help: "Attempts after the first of their call."}, op)
	o.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "calls_in_flight",
		Help: "Calls between their first attempt and their end."}, op)
	o.waiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "waits_in_progress",
		Help: "Calls waiting before their next attempt."}, op)
	o.deadLetter = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "dead_letters_total",
		Help: "Dead letters of failed calls, by result: recorded by a sink, or failed in every sink."}, []string{"operation", "result"})
	o.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "refusals_total",
		Help: "Refused calls, by who refused them: a retry budget, a circuit breaker, a concurrency limit, a rate limit or a pause."}, []string{"operation", "refused_by"})
	o.perCall = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "attempts_per_call",
		Help: "Attempts per ended call.", Buckets: retrymetrics.AttemptBuckets()}, op)
	o.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "call_duration_seconds",
		Help: "Time from the start of a call to its end, waits included.", Buckets: buckets}, op)
	if err := reg.Register(o); err != nil {
		return nil, fmt.Errorf("retryprom: registering the metrics: %w", err)
	}
	o.ops = ops
	return o, nil
}

// validName says whether s is a metric name that every Prometheus version
// and PromQL query accepts unquoted.
func validName(s string) bool {
	for i, c := range s {
		ok := c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return s != ""
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.calls, o.attempts, o.retries, o.inFlight, o.waiting, o.deadLetter, o.refusals, o.perCall, o.duration}
}

// Describe sends the descriptions of the Observer's metrics to ch.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect sends the Observer's metrics to ch.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}

// newSeries creates the series of one operation; name is a valid label
// value.
func (o *Observer) newSeries(name string) *series {
	s := &series{calls: make([]prometheus.Counter, len(outcomes))}
	for i, oc := range outcomes {
		s.calls[i] = o.calls.WithLabelValues(name, oc)
	}
	s.attempts = o.attempts.WithLabelValues(name)
	s.retries = o.retries.WithLabelValues(name)
	s.inFlight = o.inFlight.WithLabelValues(name)
	s.waiting = o.waiting.WithLabelValues(name)
	s.dlRecorded = o.deadLetter.WithLabelValues(name, "recorded")
	s.dlFailed = o.deadLetter.WithLabelValues(name, "failed")
	for i, by := range refusers {
		s.refusals[i] = o.refusals.WithLabelValues(name, by.String())
	}
	s.perCall = o.perCall.WithLabelValues(name)
	s.duration = o.duration.WithLabelValues(name)
	return s
}

// lookup returns the series of the operation name.
func (o *Observer) lookup(name string) *series { return o.ops.Get(name) }

// OnAttemptStart counts the attempt.
func (o *Observer) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	s := o.lookup(e.Name)
	s.attempts.Inc()
	if e.Attempt == 1 {
		s.inFlight.Inc()
	} else {
		s.retries.Inc()
	}
}

// OnAttemptEnd does nothing: attempts are counted as they start.
func (o *Observer) OnAttemptEnd(context.Context, retry.AttemptEnd) {}

// OnRetry counts a wait in progress when the retry has a delay.
func (o *Observer) OnRetry(_ context.Context, e retry.Scheduled) {
	if e.Delay > 0 {
		o.lookup(e.Name).waiting.Inc()
	}
}

// OnWaitEnd ends the wait in progress that OnRetry counted.
func (o *Observer) OnWaitEnd(_ context.Context, e retry.WaitEnd) {
	o.lookup(e.Name).waiting.Dec()
}

// OnDone counts the call's outcome, who refused it, its attempts,
// duration and dead letter.
func (o *Observer) OnDone(_ context.Context, e retry.Done) {
	s := o.lookup(e.Name)
	if int(e.Outcome) < len(s.calls) {
		s.calls[e.Outcome].Inc()
	}
	if e.Outcome == retry.OutcomeRefused {
		if i := refuserOf(e.Err); i >= 0 {
			s.refusals[i].Inc()
		}
	}
	if e.Attempts > 0 {
		s.inFlight.Dec()
	}
	switch {
	case e.DeadLettered:
		s.dlRecorded.Inc()
	case e.DeadLetterFailed:
		s.dlFailed.Inc()
	}
	s.perCall.Observe(float64(e.Attempts))
	s.duration.Observe(e.Elapsed.Seconds())
}
