package retry

import (
	"errors"
	"sync"
	"time"

	"github.com/steadfast-go/retry/internal/latency"
)

// HedgeOptions are the settings of [WithHedge]; nil means the defaults.
// Every field is checked. Delay alone fixes the delay; otherwise it
// follows the Retrier's own attempts, the other fields tune how, and a
// Delay given with them serves until the window has warmed up.
type HedgeOptions struct {
	// Delay is how long an attempt runs unanswered before another is sent
	// beside it. Default 0: adaptive, the Percentile of the latencies of
	// the latest Window first attempts (a hedged attempt's first, on the
	// caller's goroutine), at least MinDelay. Given with Percentile,
	// MinDelay or Window, the delay is adaptive and Delay is its value
	// until the window has warmed up, so that a new process hedges its
	// first calls too.
	Delay time.Duration
	// Percentile of those latencies that the adaptive delay follows, in
	// (0, 1): about 1-Percentile of calls then send a hedge. Default
	// 0.97: 3 % more calls downstream, where "The Tail at Scale" hedges
	// at the 95th for about 5 %.
	Percentile float64
	// MinDelay is the floor of the adaptive delay. Default 1ms.
	MinDelay time.Duration
	// Window is how many of the latest first attempts the adaptive delay
	// reads, in [10, 1e6]. Default 1000. Until a tenth of it (at least
	// 10) has been seen, the delay is not known yet: Delay serves if
	// given, else no hedge is sent.
	Window int
}

// Defaults of HedgeOptions.
const (
	defaultHedgePercentile = 0.97
	defaultHedgeMinDelay   = time.Millisecond
	defaultHedgeWindow     = 1000
)

// WithHedge is only for work that is safe to run twice at once (reads,
// idempotent writes, calls that pass their idempotency key downstream):
// in the calls of [Retrier.Hedge] and [HedgeValue], when an attempt has
// not answered after a delay, another starts beside it, up to
// [WithMaxAttempts] in all, and the first success wins. Do never hedges.
//
// The other attempts' contexts are cancelled, with the cause
// [ErrHedgeLost], and their results dropped; a value that is an
// io.Closer is closed. A failure worth retrying lets the others run on
// and, while one runs, sends the next hedge at once (as gRFC A6 does);
// the call waits and retries as usual only once all have failed; a
// permanent one ends the call. Each hedge is an attempt: counted in
// [Error.Attempts] and [Done], heard by observers on its own goroutine
// (a winner's end on the caller's, once idempotency has had its part),
// asked of the breaker and of the budget (Retry(0)) before it starts. A
// call whose first attempt answers within the delay starts no goroutine;
// fn must return when its context ends, or a hedge cannot cut the call
// short. A panic in a hedge's fn, or in a hook on its goroutine, reaches
// the caller while the call waits for it; one in a hedge that lost, after
// the call returned, ends the program, as any goroutine's panic does. The
// adaptive delay is learnt by the Retrier that New built, and shared by
// those With derives from it.
func WithHedge(o *HedgeOptions) Option {
	var h HedgeOptions
	if o != nil {
		h = *o
	}
	switch {
	case h.Delay < 0:
		return invalid("HedgeOptions.Delay (%v) must not be negative; 0 follows the attempts' latency", h.Delay)
	case h.MinDelay < 0:
		return invalid("HedgeOptions.MinDelay (%v) must not be negative", h.MinDelay)
	case h.Percentile != 0 && !(h.Percentile > 0 && h.Percentile < 1):
		return invalid("HedgeOptions.Percentile (%v) must be in (0, 1); 0 means %v", h.Percentile, defaultHedgePercentile)
	case h.Window != 0 && (h.Window < 10 || h.Window > 1e6):
		return invalid("HedgeOptions.Window (%d) must be in [10, 1000000]; 0 means %d", h.Window, defaultHedgeWindow)
	}
	if h.Delay > 0 && h.Percentile == 0 && h.MinDelay == 0 && h.Window == 0 {
		return Option{set: setHedge, v: &hedgeConfig{delay: h.Delay}}
	}
	if h.Percentile == 0 {
		h.Percentile = defaultHedgePercentile
	}
	if h.MinDelay == 0 {
		h.MinDelay = defaultHedgeMinDelay
	}
	if h.Window == 0 {
		h.Window = defaultHedgeWindow
	}
	return Option{set: setHedge, v: &hedgeConfig{delay: h.Delay, lat: latency.New(h.Window, h.Percentile, h.MinDelay)}}
}

// hedgeConfig is WithHedge's setting: a fixed delay, or the latencies
// that set it and the delay until they do.
type hedgeConfig struct {
	delay time.Duration   // fixed without lat; with it, the warm-up's (0: none)
	lat   *latency.Window // nil: the delay is fixed
	// calls keeps the calls of Hedge and HedgeValue (hedge_round.go) that
	// sent no hedge, for the next calls of the Retriers that share it.
	calls sync.Pool
}

// nextDelay is the wait before a hedge; false: send none (the adaptive
// delay is not known yet, and no warm-up delay was given).
func (h *hedgeConfig) nextDelay() (time.Duration, bool) {
	if h.lat != nil {
		if d := h.lat.Delay(); d > 0 {
			return d, true
		}
	}
	return h.delay, h.delay > 0
}

// record adds a first attempt's latency to the adaptive delay's window.
func (h *hedgeConfig) record(d time.Duration) {
	if h.lat != nil {
		h.lat.Record(d)
	}
}

// ErrHedgeLost is the cause with which a hedged call cancels the context
// of each attempt still running once another has won or ended the call.
var ErrHedgeLost = errors.New("retry: another attempt of the hedged call answered first")
