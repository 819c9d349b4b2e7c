package retry

import "context"

// attemptTimeout is the hook of WithAttemptTimeout: each attempt's context
// times out on the Retrier's clock, and is released when the attempt ends.
type attemptTimeout[T any] struct{ noHook[T] }

func (attemptTimeout[T]) context(c *call, a *attempt, ctx context.Context) context.Context {
	ctx, a.cancel = c.cfg.withTimeout(ctx, c.cfg.attemptTimeout)
	return ctx
}

func (attemptTimeout[T]) after(_ *call, a *attempt, v T, err error) (T, error) {
	a.release()
	return v, err
}

func (attemptTimeout[T]) unwind(_ *call, a *attempt) { a.release() }

// release releases the attempt's context, once.
func (a *attempt) release() {
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
}
