package retryprom

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
)

// LimitOptions configures [NewLimitCollector]. The zero value gives the
// defaults.
type LimitOptions struct {
	// Namespace is the prefix of the metric names, as in [Options]:
	// letters, digits, _ and :, not starting with a digit. Default:
	// "retry".
	Namespace string
}

// LimitCollector is a prometheus.Collector of one concurrency limit's
// figures, read from its Stats at each scrape (see the package doc's
// Concurrency limits). Build one with [NewLimitCollector]; it is safe for
// concurrent use.
type LimitCollector struct {
	limit                           interface{ Stats() overload.LimitStats }
	size, inFlight, queued, refused *prometheus.Desc
}

// NewLimitCollector returns a collector of l's figures, labelled with the
// name of the downstream l guards; register it beside the Observer. l is
// an *overload.Adaptive, or any limit with its Stats method. The error
// wraps retry.ErrInvalidOption for a name that is empty, longer than
// retrymetrics.MaxNameLen bytes or not valid UTF-8, a nil l, or a bad
// Namespace.
func NewLimitCollector(downstream string, l interface{ Stats() overload.LimitStats }, opts LimitOptions) (*LimitCollector, error) {
	if err := retrymetrics.CheckLimit(downstream, l); err != nil {
		return nil, fmt.Errorf("%w: retryprom.NewLimitCollector: %w", retry.ErrInvalidOption, err)
	}
	ns := opts.Namespace
	if ns == "" {
		ns = "retry"
	}
	if !validName(ns) {
		return nil, fmt.Errorf("%w: retryprom.NewLimitCollector: Namespace %q must be letters, digits, _ and :, not starting with a digit", retry.ErrInvalidOption, ns)
	}
	// A constant label, so that the collectors of several limits register
	// side by side and two of one name are refused.
	labels := prometheus.Labels{"downstream": downstream}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, nil, labels)
	}
	return &LimitCollector{
		limit:    l,
		size:     desc("concurrency_limit", "Attempts the concurrency limit lets in flight."),
		inFlight: desc("concurrency_limit_in_flight", "Attempts holding a permit of the concurrency limit."),
		queued:   desc("concurrency_limit_queued", "First attempts waiting for a permit of the concurrency limit."),
		refused:  desc("concurrency_limit_refused_total", "Attempts the concurrency limit refused."),
	}, nil
}

// Describe sends the descriptions of the limit's metrics to ch.
func (c *LimitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.inFlight
	ch <- c.queued
	ch <- c.refused
}

// Collect reads the limit's Stats once and sends its figures to ch.
func (c *LimitCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.limit.Stats()
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(s.Limit))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.Refused))
}
