package retry

import "github.com/steadfast-go/retry/overload"

// The pause of OverloadOptions.Pause: the guard holds a call's attempts
// here while its downstream is paused; the policy sets the pause
// (call.pauseFor) and waits it out between attempts.

// holdForPause holds the call's next attempt while its downstream is
// paused (OverloadOptions.Pause): handed off as a long wait is, or in
// memory. It returns the call's error if it was handed off, if the pause
// outlasts the call's deadline (at once, as a wait past it does) or if
// the context ends first.
func holdForPause(c *call) error {
	p := c.cfg.pause
	for d := p.Hold(c.ctx, c.cfg.sample); d > 0; d = p.Hold(c.ctx, c.cfg.sample) {
		// Handed off first: a call handed off returns at once, so its
		// deadline need not cover the pause (as decideFor rules a wait).
		if c.cfg.handOff.takes(d) {
			if err := handOffWait(c, d); err != nil {
				return err
			}
		}
		if deadline, ok := c.ctx.Deadline(); ok && d >= c.cfg.clockUntil(deadline) {
			return c.errorOf(OutcomeRefused, After(overload.ErrPaused, d), nil)
		}
		if !c.sleepOrDone(d) {
			return c.stopForContext()
		}
	}
	return nil
}
