package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress draws a progress bar with the queue's length and the calls in
// flight while the jobs run, when stdout is a terminal; otherwise it does
// nothing.
type progress struct {
	bar   *progressbar.ProgressBar
	total int
	w     io.Writer
	stopc chan struct{}
	done  chan struct{}
}

func startProgress(e env, total int, r *runner) *progress {
	p := &progress{total: total, w: e.stdout}
	if !e.terminal {
		return p
	}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(e.stdout),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionShowDescriptionAtLineEnd(),
	)
	p.stopc, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				s := r.stats.Snapshot()
				p.bar.Describe(fmt.Sprintf("queue %3d, in flight %2d, waiting %2d", r.queueLen(), s.InFlight, s.Waiting))
				_ = p.bar.Set(int(r.done.Load()))
			case <-p.stopc:
				return
			}
		}
	}()
	return p
}

func (p *progress) stop() {
	if p.bar == nil {
		return
	}
	close(p.stopc)
	<-p.done
	p.bar.Describe("")
	_ = p.bar.Set(p.total)
	_ = p.bar.Finish()
	fmt.Fprintln(p.w)
}
