package retrymetrics

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/steadfast-go/retry/internal/isnil"
)

// Setup is what the constructors of the metrics observers are given and
// check alike: what they are built on, and the settings their Options
// share. retryprom and retryotel pass it to [Prepare].
type Setup struct {
	// On is what the observer is built on: a Prometheus registerer, an
	// OpenTelemetry meter provider. It must not be nil, nor an interface
	// holding a nil pointer or func, whose methods would panic.
	On any
	// OnName names On in the error for a nil one: "the registerer".
	OnName string
	// OnHint, when set, ends the error for a nil On: "pass
	// otel.GetMeterProvider() for the global one".
	OnHint string
	// MaxOperations is the MaxOperations setting; see [NewTable].
	MaxOperations int
	// DurationBuckets is the DurationBuckets setting; see
	// [DurationBuckets].
	DurationBuckets []float64
}

// Prepare checks s and returns the operation table, made with newValue as
// [NewTable] makes it, and the bounds of the call-duration histogram, as
// [DurationBuckets] gives them. It checks, in this order: s.On ("the
// registerer is nil", or "the registerer is nil (a nil
// *prometheus.Registry)" for a nil pointer held in the interface),
// s.MaxOperations, s.DurationBuckets. The error names the setting and
// what is wrong with it; callers wrap it with their own sentinel and name
// (retryprom and retryotel: "%w: retryprom.New: %w" with
// retry.ErrInvalidOption).
func Prepare[T any](s Setup, newValue func(label string) T) (*Table[T], []float64, error) {
	name := s.OnName
	if name == "" {
		name = "the argument"
	}
	if err := CheckNotNil(s.On, name, s.OnHint); err != nil {
		return nil, nil, err
	}
	ops, err := NewTable(s.MaxOperations, newValue)
	if err != nil {
		return nil, nil, err
	}
	buckets, err := DurationBuckets(s.DurationBuckets)
	if err != nil {
		return nil, nil, err
	}
	return ops, buckets, nil
}

// CheckNotNil returns an error when v is nil or an interface holding a
// nil pointer or func, whose methods would panic: "name is nil", then v's
// type if it has one, then "; hint" if hint is set. Prepare checks
// Setup.On with it.
func CheckNotNil(v any, name, hint string) error {
	if !isnil.Is(v) {
		return nil
	}
	msg := name + " is nil"
	if v != nil {
		msg += fmt.Sprintf(" (a nil %T)", v)
	}
	if hint != "" {
		msg += "; " + hint
	}
	return errors.New(msg)
}

// CheckLimit checks what the exporters of a concurrency limit's figures
// (retryprom's NewLimitCollector, retryotel's RegisterLimit) are given:
// the downstream's name, which becomes a label, must be 1 to [MaxNameLen]
// bytes of valid UTF-8; the limit must not be nil, nor an interface
// holding a nil pointer or func. The error names the problem, never the
// name; callers wrap it as they wrap [Prepare]'s.
func CheckLimit(downstream string, limit any) error {
	switch {
	case downstream == "":
		return errors.New("the downstream's name is empty")
	case len(downstream) > MaxNameLen:
		return fmt.Errorf("the downstream's name is %d bytes, longer than %d", len(downstream), MaxNameLen)
	case !utf8.ValidString(downstream):
		return errors.New("the downstream's name is not valid UTF-8")
	}
	return CheckNotNil(limit, "the limit", "")
}
