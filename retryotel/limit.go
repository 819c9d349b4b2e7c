package retryotel

import (
	"context"
	"errors"
	"fmt"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
)

// RegisterLimit reports l's figures through the meter [ScopeName] of mp,
// read from its Stats at each collection, with retry.downstream the name
// of the downstream l guards (see the package doc's Concurrency limits);
// l is an *overload.Adaptive, or any limit with its Stats method.
// Unregister the result to stop. The error wraps retry.ErrInvalidOption
// for a nil mp, a name that is empty, longer than
// retrymetrics.MaxNameLen bytes or not valid UTF-8, or a nil l, or is
// the meter's error.
func RegisterLimit(mp metric.MeterProvider, downstream string, l interface{ Stats() overload.LimitStats }) (metric.Registration, error) {
	err := retrymetrics.CheckNotNil(mp, "the meter provider", "pass otel.GetMeterProvider() for the global one")
	if err == nil {
		err = retrymetrics.CheckLimit(downstream, l)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: retryotel.RegisterLimit: %w", retry.ErrInvalidOption, err)
	}
	m := mp.Meter(ScopeName)
	var (
		size, inFlight, queued metric.Int64ObservableUpDownCounter
		refused                metric.Int64ObservableCounter
		errs                   [4]error
	)
	size, errs[0] = m.Int64ObservableUpDownCounter("retry.concurrency_limit", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts the concurrency limit lets in flight."))
	inFlight, errs[1] = m.Int64ObservableUpDownCounter("retry.concurrency_limit.in_flight", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts holding a permit of the concurrency limit."))
	queued, errs[2] = m.Int64ObservableUpDownCounter("retry.concurrency_limit.queued", metric.WithUnit("{attempt}"),
		metric.WithDescription("First attempts waiting for a permit of the concurrency limit."))
	refused, errs[3] = m.Int64ObservableCounter("retry.concurrency_limit.refused", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts the concurrency limit refused."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("retryotel: making the limit's instruments: %w", err)
	}
	set := metric.WithAttributeSet(attribute.NewSet(DownstreamKey.String(downstream)))
	// One reading of Stats for the four figures, so that they agree.
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := l.Stats()
		o.ObserveInt64(size, int64(s.Limit), set)
		o.ObserveInt64(inFlight, int64(s.InFlight), set)
		o.ObserveInt64(queued, int64(s.Queued), set)
		o.ObserveInt64(refused, int64(min(s.Refused, math.MaxInt64)), set)
		return nil
	}, size, inFlight, queued, refused)
	if err != nil {
		return nil, fmt.Errorf("retryotel: registering the limit's callback: %w", err)
	}
	return reg, nil
}
