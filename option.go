package retry

import (
	"fmt"
	"time"

	"github.com/steadfast-go/retry/internal/isnil"
)

// Option configures a [Retrier]; build one with a With function (the zero
// Option is invalid). [New], [Retrier.With], [Do] and [DoValue] apply
// options once, in order, a later one overriding an earlier of its kind.
// An Option holds its setting, and applying it calls no code.
type Option struct {
	set  setting
	kind uint8 // a Jitter's kind; its factor's bits are in n
	n    int64 // attempts, a duration, a Jitter's factor
	// v holds an interface setting, a payload, a resolved feature config
	// or the error of bad input. The payload is here rather than in a
	// field of its own because Options are built and copied at every call
	// of the package-level Do: 48 bytes each instead of 72.
	v any
	s string // a name
}

// setting says which setting an Option holds.
type setting uint8

const (
	setNone setting = iota // the zero Option
	setInvalid
	setMaxAttempts
	setBackoff
	setJitter
	setMaxDelay
	setMaxElapsed
	setAttemptTimeout
	setClock
	setRetryIf
	setRandom
	setObserver
	setName
	setPayload
	setIdempotency
	setDeadLetter
	setOverload
	setHedge
	setHandOff
	setResume
	setFunc // anything else: v is a func(config) config, for the package's own use
)

// invalid is the Option of bad input: New reports err.
func invalid(format string, args ...any) Option {
	return Option{set: setInvalid, v: fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)}
}

// nilArg reports whether v is nil in effect, and names it for an error:
// "nil", or "(T)(nil)" for a nil pointer or func inside the interface,
// whose methods would panic at the first call.
func nilArg(v any) (string, bool) {
	switch {
	case v == nil:
		return "nil", true
	case isnil.Is(v):
		return fmt.Sprintf("(%T)(nil)", v), true
	}
	return "", false
}

// or returns d, or def when d is zero.
func or(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
