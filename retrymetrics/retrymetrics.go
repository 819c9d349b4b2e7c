// Package retrymetrics holds what the metrics observers of
// github.com/steadfast-go/retry share, so that they count alike: the
// bounded table of operation names, the histogram buckets, and the checks
// their constructors begin with ([Prepare]: what they are built on must
// not be nil; the settings they have in common, MaxOperations and
// DurationBuckets; [CheckLimit] for the exporters of a concurrency
// limit's figures). retrystats' Stats, retryprom and retryotel use it; an
// Observer of your own may too. The rule that keeps the calls-in-flight
// and waits-in-progress gauges needs no code: the retry.Observer doc
// states it.
//
// It imports only the standard library (and the retry module's nil check,
// itself standard library only), so that the retry package can use it.
// Nothing in it keeps global state; every function is safe for concurrent
// use, and so is a [Table].
//
// # Cost
//
// [Table.Get] reads a copy-on-write map with one atomic load and takes a
// lock only for a name it has not seen while the limit allows more. Names
// longer than [MaxNameLen] are not kept, so however many there are they
// cost no memory.
package retrymetrics

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// DefaultMaxOperations is the number of distinct operation names that get
// series of their own when the MaxOperations setting is 0.
const DefaultMaxOperations = 100

// AttemptBounds returns the upper bounds, in attempts, of the
// attempts-per-call histogram: 1, 2, 3, 4, 5, 10, 100, 1000. A last bucket
// counts calls with more.
func AttemptBounds() [8]int { return [...]int{1, 2, 3, 4, 5, 10, 100, 1000} }

// DurationBounds returns the upper bounds of the default call-duration
// histogram: 1ms, 5ms, 10ms, 25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s,
// 5s, 10s, 30s, 1m. A last bucket counts longer calls.
func DurationBounds() [14]time.Duration {
	return [...]time.Duration{
		time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
		25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
		250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
		30 * time.Second, time.Minute,
	}
}

// AttemptBuckets returns [AttemptBounds] as a new slice of float64, the
// form histogram APIs take.
func AttemptBuckets() []float64 {
	b := AttemptBounds()
	out := make([]float64, len(b))
	for i, v := range b {
		out[i] = float64(v)
	}
	return out
}

// DurationBuckets returns the bounds, in seconds, of the call-duration
// histogram for the DurationBuckets setting custom: a copy of custom, or
// [DurationBounds] in seconds when custom is nil. Bounds that are empty
// (but not nil), not increasing, NaN or infinite (histograms add the +Inf
// bucket themselves) give an error that names the setting; callers wrap
// it with their own sentinel (retryprom and retryotel use
// retry.ErrInvalidOption).
func DurationBuckets(custom []float64) ([]float64, error) {
	if custom == nil {
		b := DurationBounds()
		out := make([]float64, len(b))
		for i, d := range b {
			out[i] = d.Seconds()
		}
		return out, nil
	}
	for i, b := range custom {
		if math.IsNaN(b) || math.IsInf(b, 0) {
			return nil, fmt.Errorf("DurationBuckets %v: bound %d is %v; bounds must be finite (the +Inf bucket is added by itself)", custom, i, b)
		}
	}
	ok := len(custom) > 0
	for i := 1; i < len(custom) && ok; i++ {
		ok = custom[i] > custom[i-1]
	}
	if !ok {
		return nil, fmt.Errorf("DurationBuckets %v must be one or more increasing bounds", custom)
	}
	return slices.Clone(custom), nil
}

// OutcomeLabels returns the outcome label values, indexed by outcome:
// labels[o] is o.String() for every o from 0 to last. Pass
// retry.OutcomeUnknown, the last retry.Outcome. (It is generic because
// this package does not import retry.)
func OutcomeLabels[O interface {
	~uint8
	String() string
}](last O) []string {
	labels := make([]string, 0, int(last)+1)
	for i := 0; i <= int(last); i++ {
		labels = append(labels, O(i).String())
	}
	return labels
}
