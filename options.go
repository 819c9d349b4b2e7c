package retry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/overload"
)

// Defaults used when an option is not given. They are also what the zero
// [Retrier] does.
const (
	// defaultMaxAttempts is the number of attempts, the first call
	// included: one call and two retries, as the SRE book and the AWS SDKs
	// use, so a failing dependency sees at most 3x its normal load.
	defaultMaxAttempts = 3
	// defaultMaxServerDelay caps server-supplied waits ([After]) when
	// [WithMaxDelay] is not given, so a misbehaving Retry-After cannot
	// park a caller for hours. It does not cap the [Backoff]'s waits: the
	// schedule given to [WithBackoff] is honoured as configured.
	defaultMaxServerDelay = 30 * time.Second
	// defaultInitialDelay is the first wait of the default backoff,
	// Exponential(100ms, 2, 10s) with FullJitter.
	defaultInitialDelay = 100 * time.Millisecond
	// defaultMultiplier is the growth factor of the default backoff.
	defaultMultiplier = 2.0
	// defaultBackoffMax caps the waits of the default backoff.
	defaultBackoffMax = 10 * time.Second
)

// applyOne applies o to c.
func (cfg *config) applyOne(i int, o *Option) {
	switch o.set {
	case setNone:
		cfg.failf("option %d is the zero Option; build options with the With functions", i)
	case setInvalid:
		cfg.failWith(o.v.(error))
	case setMaxAttempts:
		cfg.maxAttempts = int(o.n)
	case setBackoff:
		if err := checkBackoff(o.v); err != nil {
			cfg.failWith(err)
		} else {
			cfg.backoff = o.v.(Backoff)
		}
	case setJitter:
		j := o.jitter()
		if err := j.validate(); err != nil {
			cfg.failWith(err)
		} else {
			cfg.jitter = j
		}
	case setMaxDelay:
		cfg.maxDelay = time.Duration(o.n)
	case setMaxElapsed:
		cfg.maxElapsed = time.Duration(o.n)
	case setAttemptTimeout:
		cfg.attemptTimeout = time.Duration(o.n)
	case setClock:
		cfg.clock = o.v.(clock.Clock)
	case setRetryIf:
		cfg.retryIf = o.v.(func(error) bool)
	case setRandom:
		cfg.rand = o.v.(*lockedSource)
	case setObserver:
		obs := o.v.(Observer)
		switch prev := cfg.observer.(type) {
		case nil:
			cfg.observer = obs
		case observers:
			cfg.observer = append(prev[:len(prev):len(prev)], obs)
		default:
			cfg.observer = observers{prev, obs}
		}
	case setName:
		cfg.name = o.s
	case setPayload:
		cfg.payload = o.v.([]byte)
	case setIdempotency:
		cfg.idem = o.v.(*idemConfig)
	case setDeadLetter:
		cfg.dl = o.v.(*deadLetterConfig)
	case setOverload:
		cfg.overload(o.v.(*OverloadOptions))
	case setHedge:
		cfg.hedge = o.v.(*hedgeConfig)
	case setHandOff:
		cfg.handOff = o.v.(*handOffConfig)
	case setResume:
		cfg.resume = o.v.(*resumeConfig)
	case setFunc:
		// By value: a *config passed to a func value would put every
		// config on the heap.
		*cfg = o.v.(func(config) config)(*cfg)
	}
}

// quickOptions reports whether opts are valid and leave the first
// attempt a plain call of fn (config.plainFirst), so that the
// package-level Do may call fn before it builds the config, which a first
// success then never needs. It checks what apply would refuse and answers
// false whenever it is not sure: for any setting not listed here (a new
// one included), and for any time limit, observer or feature, even one
// that a later option turns off. apply stays the only place that builds a
// config from options.
func quickOptions(opts []Option) bool {
	for i := range opts {
		o := &opts[i]
		switch o.set {
		case setMaxAttempts, setMaxDelay, setClock, setRetryIf, setRandom, setName, setPayload:
			// Checked when built, and read only after a failure.
		case setMaxElapsed, setAttemptTimeout:
			if o.n != 0 {
				return false // the first attempt needs the start time or its own context
			}
		case setBackoff:
			if checkBackoff(o.v) != nil {
				return false
			}
		case setJitter:
			if o.jitter().validate() != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// config holds what the options set over the defaults, for the calls to
// use as they are; build makes it, apply adds options to it. The zero
// Retrier's config, all zero, is never used by a call: Do takes zeroConfig
// instead.
type config struct {
	err            error // the first invalid option, reported by New
	maxAttempts    int
	backoff        Backoff
	jitter         Jitter
	maxDelay       time.Duration // caps every wait; 0: only server-supplied ones, at defaultMaxServerDelay
	maxElapsed     time.Duration
	attemptTimeout time.Duration
	clock          clock.Clock
	clockBase      time.Time // clock's time when derived: see clock.go
	retryIf        func(error) bool
	rand           *lockedSource
	observer       Observer
	waitArmed      func(time.Duration) // the clock's WaitArmed, if it has one; set by derive
	name           string
	payload        []byte
	dl             *deadLetterConfig     // nil without dead-letter options
	idem           *idemConfig           // nil: not idempotent
	budget         overload.Budget       // nil: no budget
	bucket         *overload.TokenBucket // budget, when it is one: its success inlines; set by derive
	ratio          *overload.Ratio       // budget, when it is one: its success inlines; set by derive
	breaker        overload.Breaker      // nil: no breaker
	limit          overload.Limit        // nil: no concurrency limit
	rate           overload.RateLimit    // nil: no rate limit
	pause          *overload.Pause       // nil: no shared pause
	limitTimed     bool                  // the limit wants latencies (its Timed); set by derive
	hedge          *hedgeConfig          // nil: no hedging
	hedged         *config               // with hedge: this config as Hedge's calls run it, featHedge on; set by derive
	handOff        *handOffConfig        // nil: no hand-off of long waits
	resume         *resumeConfig         // nil: calls start afresh
	nestedRetries  bool                  // retry errors other Retriers gave up on
	features       features              // which hooks a call has; set by derive
	zeroWaits      bool                  // the backoff is Constant(0); set by derive
}

// features says which of a call's features are on: each but the time
// budget is a hook (hook.go). derive sets them once, and a call's route
// follows from them alone.
type features uint16

const (
	featBudget         features = 1 << iota // OverloadOptions.Budget: told of every attempt
	featBreaker                             // OverloadOptions.Breaker
	featObserver                            // WithObserver
	featAttemptTimeout                      // WithAttemptTimeout
	featIdempotency                         // WithIdempotency
	featDeadLetter                          // WithDeadLetter
	featTimeBudget                          // WithMaxElapsed: no hook, but the call reads its start
	featHedge                               // a call of Hedge on a Retrier with WithHedge (config.hedged)
	featHandOff                             // WithHandOff
	featResume                              // WithResume: no hook, but the call starts where a handed-off one stopped
	featLimit                               // OverloadOptions.Limit
	featRate                                // OverloadOptions.Rate
	featPause                               // OverloadOptions.Pause

	featGuard = featBudget | featBreaker | featLimit | featRate | featPause // the guard's (guard.go)
	// featAdmit are what an entry point's first attempt asks (guardedFirst).
	featAdmit = featLimit | featRate | featPause
)

// plainFirst says whether a call's first attempt is a plain call of fn,
// which only a budget, a pause, a rate and an untimed limit hear of, so
// that an entry point may make it itself (guardedFirst asks them).
func (cfg *config) plainFirst() bool {
	return cfg.features&^(featBudget|featAdmit) == 0 && !cfg.limitTimed
}

// hooked says whether a call has hooks: the time budget is the policy's.
func (cfg *config) hooked() bool { return cfg.features&^featTimeBudget != 0 }

// readsStart says whether a call reads the clock when it starts: for
// observers, the time budget and dead letters.
func (cfg *config) readsStart() bool {
	return cfg.features&(featObserver|featTimeBudget|featDeadLetter) != 0 || cfg.limitTimed
}

func (cfg *config) failf(format string, args ...any) {
	if cfg.err == nil {
		cfg.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
	}
}

// failWith keeps err unless an earlier option was invalid: New reports
// the first problem.
func (cfg *config) failWith(err error) {
	if cfg.err == nil {
		cfg.err = err
	}
}

// defaults is a Retrier's settings before any option.
func defaults() config {
	return config{maxAttempts: defaultMaxAttempts, backoff: defaultBackoff, jitter: Jitter{kind: fullJitter}}
}

// defaultBackoff is the schedule of a Retrier without WithBackoff. It is
// made once, so that the defaults cost no allocation.
var defaultBackoff Backoff = exponential{initial: defaultInitialDelay, multiplier: defaultMultiplier, max: defaultBackoffMax}

// zeroConfig is what the zero Retrier does: New() without its budget. It
// is made once and never changed.
var zeroConfig = build(nil, false)

// build returns the settings opts make over the defaults, with the first
// invalid option's error in err; withBudget adds New's default budget, on
// the Retrier's clock, unless an option sets one.
func build(opts []Option, withBudget bool) config {
	cfg := defaults()
	for i := range opts {
		cfg.applyOne(i, &opts[i])
	}
	if withBudget && !slices.ContainsFunc(opts, setsBudget) {
		cfg.budget = defaultBudget(cfg.clock)
	}
	_ = cfg.derive()
	return cfg
}

// apply applies opts over cfg, in order, as With does, and derives what
// the calls read from the result; it returns the first invalid option's
// error.
func (cfg *config) apply(opts []Option) error {
	for i := range opts {
		cfg.applyOne(i, &opts[i])
	}
	return cfg.derive()
}

// derive checks the settings as a whole and sets what the calls read
// instead of working it out each time. It is the one place that state is
// set, so it cannot disagree with the settings.
func (cfg *config) derive() error {
	if cfg.idem != nil && cfg.attemptTimeout > 0 && cfg.idem.lease <= cfg.attemptTimeout {
		cfg.failf("the idempotency lease (%v) must be longer than WithAttemptTimeout (%v), or a running attempt could lose its claim; raise IdempotencyOptions.Lease", cfg.idem.lease, cfg.attemptTimeout)
	}
	if cfg.handOff != nil && cfg.name == "" {
		cfg.failf("WithHandOff needs WithName: the worker that resumes a handed-off call finds its work by the name")
	}
	cfg.waitArmed, cfg.clockBase = nil, time.Time{}
	if cfg.clock != nil {
		cfg.clockBase = cfg.clock.Now()
	}
	if a, ok := cfg.clock.(interface{ WaitArmed(time.Duration) }); ok {
		cfg.waitArmed = a.WaitArmed
	}
	cfg.features = 0
	for _, f := range [...]struct {
		on  bool
		bit features
	}{
		{cfg.budget != nil, featBudget},
		{cfg.breaker != nil, featBreaker},
		{cfg.limit != nil, featLimit},
		{cfg.rate != nil, featRate},
		{cfg.pause != nil, featPause},
		{cfg.observer != nil, featObserver},
		{cfg.attemptTimeout > 0, featAttemptTimeout},
		{cfg.idem != nil, featIdempotency},
		{cfg.dl.active(), featDeadLetter},
		{cfg.maxElapsed > 0, featTimeBudget},
		{cfg.handOff != nil, featHandOff},
		{cfg.resume != nil, featResume},
	} {
		if f.on {
			cfg.features |= f.bit
		}
	}
	cfg.bucket, _ = cfg.budget.(*overload.TokenBucket)
	cfg.ratio, _ = cfg.budget.(*overload.Ratio)
	t, ok := cfg.limit.(interface{ Timed() bool })
	cfg.limitTimed = ok && t.Timed()
	b, ok := cfg.backoff.(constant)
	cfg.zeroWaits = ok && b.d == 0
	if cfg.idem != nil {
		cfg.idem = cfg.idem.forRetrier(cfg.clock, cfg.clockBase) // before hedged: Hedge's calls share it
	}
	cfg.hedged = nil
	if cfg.hedge != nil {
		// Hedge's calls run on a copy that has the bit, so that Do's
		// loop tests no more than its own features.
		h := *cfg
		h.features |= featHedge
		cfg.hedged = &h
	}
	return cfg.err
}

// WithMaxAttempts sets how many attempts a call may make, the first
// included: 1 never retries, and math.MaxInt stops only on success, an
// error not retried, the context or [WithMaxElapsed]. n must be at least 1.
// Default: 3, as the SRE book and the AWS SDKs use, so a failing
// dependency sees at most 3x its load.
func WithMaxAttempts(n int) Option {
	if n < 1 {
		return invalid("WithMaxAttempts(%d): attempts must be at least 1 (math.MaxInt for no limit)", n)
	}
	return Option{set: setMaxAttempts, n: int64(n)}
}

// WithBackoff sets the schedule of waits between attempts. Default:
// Exponential(100ms, 2, 10s). b must not be nil, nor hold a nil
// [BackoffFunc] or nil pointer.
func WithBackoff(b Backoff) Option {
	// Checked when applied (checkBackoff): this stays small enough to
	// inline, so options written out in a call cost no call each.
	return Option{set: setBackoff, v: b}
}

// WithJitter sets how waits are randomized. Default: [FullJitter]. It has
// no effect on [Decorrelated], which is random by itself.
func WithJitter(j Jitter) Option {
	// Checked when applied, like WithBackoff, to stay inlinable.
	return Option{set: setJitter, kind: uint8(j.kind), n: int64(math.Float64bits(j.factor))}
}

// WithMaxDelay caps every wait, the jittered backoff's and [After]'s
// alike. d must be positive (for no waits use WithBackoff(Constant(0))).
// Default: the schedule's own max, and 30s on server-supplied delays.
func WithMaxDelay(d time.Duration) Option {
	switch {
	case d < 0:
		return invalid("WithMaxDelay(%v): the delay must not be negative", d)
	case d == 0:
		return invalid("WithMaxDelay(0): a zero cap would remove every wait; for no waits use WithBackoff(Constant(0))")
	}
	return Option{set: setMaxDelay, n: int64(d)}
}

// WithMaxElapsed sets a time budget for the whole call, attempts and waits,
// on the Retrier's clock from the start of Do: when a wait would not end
// before it, Do stops at once with [OutcomeMaxElapsed] (cause
// [ErrExhausted]). It does not interrupt a running attempt (use a deadline
// or [WithAttemptTimeout]). d must not be negative; 0, the default, means
// no budget.
func WithMaxElapsed(d time.Duration) Option {
	if d < 0 {
		return invalid("WithMaxElapsed(%v): the budget must not be negative", d)
	}
	return Option{set: setMaxElapsed, n: int64(d)}
}

// WithAttemptTimeout gives each attempt its own context, derived from Do's,
// that times out after d on the Retrier's clock. An attempt that times out
// is retried like any other failure (unless Do's own context is done). d
// must not be negative; 0 means no per-attempt timeout. Default: none.
func WithAttemptTimeout(d time.Duration) Option {
	if d < 0 {
		return invalid("WithAttemptTimeout(%v): the timeout must not be negative", d)
	}
	return Option{set: setAttemptTimeout, n: int64(d)}
}

// WithClock sets the clock for waits, the time budget, attempt, store and
// sink timeouts, and observer durations. c must not be nil, nor hold a nil
// pointer. Default: real time. Deadlines are compared with c.Now, so build
// a mock's with mock.WithTimeout or mock.WithDeadline. Clocks in the
// package doc says how Do tells a test it has armed a wait (WaitArmed).
func WithClock(c clock.Clock) Option {
	if s, isNil := nilArg(c); isNil {
		return invalid("WithClock(%s): the clock must not be nil", s)
	}
	return Option{set: setClock, v: c}
}

// WithRetryIf sets which errors are worth another attempt: when f returns
// false, Do stops with [OutcomePermanent]. f is not asked about [Permanent]
// errors or context.Canceled (never retried), [After] ones (always), nor
// when Do's context is done. f must be safe for concurrent use. Default:
// every error is retried.
func WithRetryIf(f func(error) bool) Option {
	if f == nil {
		return invalid("WithRetryIf(nil): the predicate must not be nil")
	}
	return Option{set: setRetryIf, v: f}
}

// WithRandom sets the source of the samples of jitter and [Decorrelated],
// such as rand.NewPCG(1, 2) for a reproducible schedule; the Retrier locks
// a mutex around src when it computes a wait. src must not be nil, nor hold
// a nil pointer. Default: math/rand/v2's global generator, with no lock.
func WithRandom(src rand.Source) Option {
	if s, isNil := nilArg(src); isNil {
		return invalid("WithRandom(%s): the source must not be nil", s)
	}
	return Option{set: setRandom, v: &lockedSource{src: src}}
}

// WithObserver adds an observer of attempts, retries and outcomes; given
// several, each gets every event, in the order added. o must not be nil,
// nor hold a nil pointer. Default: none.
func WithObserver(o Observer) Option {
	if s, isNil := nilArg(o); isNil {
		return invalid("WithObserver(%s): the observer must not be nil", s)
	}
	return Option{set: setObserver, v: o}
}

// WithName names the operation for observers, logs and metrics (as their
// "operation" label). Keep names few and fixed, such as "charge-card":
// never put IDs or user input in them. Default: "".
func WithName(name string) Option {
	return Option{set: setName, s: name}
}

// WithPayload attaches the operation's input, such as a request body, to
// the call: idempotent calls fingerprint it to detect a key reused for
// different work, and dead letters keep it for replay. Do does not copy p;
// do not change it while the call runs. Default: none.
func WithPayload(p []byte) Option {
	return Option{set: setPayload, v: p}
}

// lockedSource makes a rand.Source safe for concurrent use.
type lockedSource struct {
	mu  sync.Mutex // guards src
	src rand.Source
}

// uniform returns a uniform sample in [0, 1).
func (l *lockedSource) uniform() float64 {
	l.mu.Lock()
	x := l.src.Uint64()
	l.mu.Unlock()
	return float64(x>>11) / (1 << 53)
}

// overload applies the fields of o that are set.
func (cfg *config) overload(o *OverloadOptions) {
	if o.NoBudget {
		cfg.budget = nil
	}
	if o.Budget != nil {
		cfg.budget = o.Budget
	}
	if o.Breaker != nil {
		cfg.breaker = o.Breaker
	}
	if o.Limit != nil {
		cfg.limit = o.Limit
	}
	if o.Rate != nil {
		cfg.rate = o.Rate
	}
	if o.Pause != nil {
		cfg.pause = o.Pause
	}
	if o.NestedRetries {
		cfg.nestedRetries = true
	}
}
