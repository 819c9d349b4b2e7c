package retry

import "context"

// timingOut is the hook of WithAttemptTimeout: each attempt's context
// times out on the Retrier's clock, and is released when the attempt ends.
type timingOut[T any] struct{ noHook[T] }

func (timingOut[T]) fnContext(c *call, a *attemptState, ctx context.Context) context.Context {
	return attemptContext(c, a, ctx)
}

func (timingOut[T]) after(_ *call, a *attemptState, v T, err error) (T, error) {
	a.cancelContext()
	return v, err
}

func (timingOut[T]) unwind(_ *call, a *attemptState) { a.cancelContext() }
