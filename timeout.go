package retry

import "context"

// timingOut is the hook of WithAttemptTimeout: each attempt's context
// times out on the Retrier's clock, and is released when the attempt ends.
type timingOut[T any] struct{ noHook[T] }

func (timingOut[T]) fnContext(c *call, a *attemptState, ctx context.Context) context.Context {
	ctx, a.cancel = c.cfg.withTimeout(ctx, c.cfg.attemptTimeout)
	return ctx
}

func (timingOut[T]) after(_ *call, a *attemptState, v T, err error) (T, error) {
	a.release()
	return v, err
}

func (timingOut[T]) unwind(_ *call, a *attemptState) { a.release() }

// release releases the attempt's context, once.
func (a *attemptState) release() {
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
}
