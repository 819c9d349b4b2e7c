package retry

import (
	"context"
	"time"
)

// handingOff is the hook of WithHandOff: before a long wait, or any wait
// once the process is stopping, it gives the call's remaining attempts to
// the HandOff and ends the call; a wait in memory that the stop cuts
// short, it hands off then. It keeps no state: a parked call's frame has
// no room for it (see engine.go); a wait's is in the call's context.
type handingOff[T any] struct{ noHook[T] }

// stopWait is the context a call waits on in memory while HandOffOptions.Stopping
// may end the wait: the call's, ended early by Stopping.
type stopWait struct {
	context.Context
	call   context.Context // the call's own, given back when the wait ends
	cancel context.CancelFunc
	stop   func() bool   // unregisters cancel from Stopping
	ends   time.Duration // a clock reading: when the wait ends
}

// retrying hands off the wait of d if it should, and returns the call's
// error if the HandOff took it; nil (wait in memory) otherwise, its
// failure included, unless the wait would end past the deadline.
func (handingOff[T]) retrying(c *call, d time.Duration) error {
	ho := c.cfg.handOff
	if !ho.takes(d) {
		if ho.stopping != nil && d > 0 { // the loop waits on c.ctx: let Stopping end it
			w := &stopWait{call: c.ctx, ends: c.cfg.clockReading() + d}
			w.Context, w.cancel = context.WithCancel(c.ctx)
			w.stop = context.AfterFunc(ho.stopping, w.cancel)
			c.ctx = w
		}
		return nil
	}
	if err := handOffWait(c, d); err != nil {
		return err
	}
	if deadline, ok := c.ctx.Deadline(); ok && d >= c.cfg.clockUntil(deadline) {
		return c.stopFor(stopDeadline) // no wait in memory can be made
	}
	return nil
}

// waited gives the call its context back and hands off the rest of a
// wait in memory that the process's stop ended early; if the HandOff
// fails, it waits the rest here.
func (handingOff[T]) waited(c *call, _ time.Duration) error {
	w, ok := c.ctx.(*stopWait)
	if !ok {
		return nil
	}
	w.end(c)
	left := w.ends - c.cfg.clockReading()
	if c.ctx.Err() != nil || left <= 0 || !c.cfg.handOff.stopped() {
		return nil // the wait is over, or the call's context ended it
	}
	if err := handOffWait(c, left); err != nil {
		return err
	}
	c.sleepOrDone(left)
	return nil
}

// unwind gives the call its context back if a panic cut a wait short.
func (handingOff[T]) unwind(c *call, _ *attemptState) {
	if w, ok := c.ctx.(*stopWait); ok {
		w.end(c)
	}
}

// end gives c its own context back and releases the wait's.
func (w *stopWait) end(c *call) {
	c.ctx = w.call
	w.stop()
	w.cancel()
}

// handOffWait gives the call's remaining attempts, due after a wait of d,
// to the HandOff, and returns the call's error if it took them.
func handOffWait(c *call, d time.Duration) error {
	ho := c.cfg.handOff
	w := Waiting{Name: c.cfg.name, Attempts: c.attempts, Wait: d, Due: c.cfg.wallNow().Add(d),
		Err: c.last, Payload: c.cfg.payload}
	if c.cfg.features&featIdempotency != 0 {
		w.IdempotencyKey = c.cfg.idempotencyKey(c.ctx)
	}
	ctx, cancel := c.cfg.withTimeout(c.ctx, ho.timeout)
	id, err := ho.h.HandOff(ctx, w)
	cancel()
	if err != nil || id == "" {
		return nil
	}
	return c.errorOf(OutcomeHandedOff, &HandedOff{ID: id}, nil)
}
