package retry

// hook is one feature's part in one call of Do. The loop calls it at fixed
// points and knows nothing else of the feature: idempotency and dead
// letters join a call this way, and so will a retry budget or a circuit
// breaker. Each call gets its own hooks (see run), so their per-call state
// lives in them; hooks run on Do's goroutine, in order, never under a lock.
type hook[T any] interface {
	// begin runs before the first attempt, while the context is live.
	// done ends the call at once with v and err: a replayed outcome, or
	// an *Error for a call refused before any attempt.
	begin(c *call) (v T, err error, done bool)
	// before runs before each attempt. skip makes v and err the
	// attempt's result without calling fn (another caller holds the
	// key; its outcome was replayed).
	before(c *call) (v T, err error, skip bool)
	// after runs when the attempt returned v and err, and returns the
	// attempt's result, which it may replace (a success whose outcome
	// could not be recorded).
	after(c *call, v T, err error) (T, error)
	// end runs once, when the call ends with v and err (nil, or an
	// *Error), and returns what Do returns.
	end(c *call, v T, err error) (T, error)
}

// hooks are the features of one call, in the order they run; a nil
// *hooks has none (the fast path). Each is a
// hook, but the loop reaches them through these concrete fields rather than
// a []hook[T]: a *call passed to an interface method escapes to the heap,
// and Do must not allocate. A new feature implements hook[T] and takes a
// field here, and a line in each method below.
type hooks[T any] struct {
	idem *idemCall[T]      // nil: not idempotent
	dl   deadLetterHook[T] // dl.d nil: no dead letters
}

// The features implement the seam.
var (
	_ hook[struct{}] = (*idemCall[struct{}])(nil)
	_ hook[struct{}] = deadLetterHook[struct{}]{}
)

func (hs *hooks[T]) begin(c *call) (v T, err error, done bool) {
	if hs == nil {
		return v, nil, false
	}
	if hs.idem != nil {
		if v, err, done = hs.idem.begin(c); done {
			return v, err, true
		}
	}
	if hs.dl.d != nil {
		if v, err, done = hs.dl.begin(c); done {
			return v, err, true
		}
	}
	return v, nil, false
}

func (hs *hooks[T]) before(c *call) (v T, err error, skip bool) {
	if hs == nil {
		return v, nil, false
	}
	if hs.idem != nil {
		if v, err, skip = hs.idem.before(c); skip {
			return v, err, true
		}
	}
	if hs.dl.d != nil {
		if v, err, skip = hs.dl.before(c); skip {
			return v, err, true
		}
	}
	return v, nil, false
}

func (hs *hooks[T]) after(c *call, v T, err error) (T, error) {
	if hs == nil {
		return v, err
	}
	if hs.idem != nil {
		v, err = hs.idem.after(c, v, err)
	}
	if hs.dl.d != nil {
		v, err = hs.dl.after(c, v, err)
	}
	return v, err
}

func (hs *hooks[T]) end(c *call, v T, err error) (T, error) {
	if hs == nil {
		return v, err
	}
	if hs.idem != nil {
		v, err = hs.idem.end(c, v, err)
	}
	if hs.dl.d != nil {
		v, err = hs.dl.end(c, v, err)
	}
	return v, err
}
