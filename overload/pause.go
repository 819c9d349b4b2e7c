package overload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/internal/isnil"
)

// PauseOptions configures a [Pause]. The zero value gives the defaults.
type PauseOptions struct {
	// Spread is the window after a pause's end over which the attempts
	// it held go, each at a random time in it, so that they do not all
	// reach the downstream at once; none goes before the end the server
	// asked for. Set it near the calls held divided by the rate the
	// downstream allows. At least 1 ms. Default: 1 s.
	Spread time.Duration
	// Max caps a pause, however long a server asks for. At least 1 ms.
	// Default: 1 minute.
	Max time.Duration
	// Partitioned keeps a pause per partition ([WithPartition]) rather
	// than one for the whole downstream. Default: false.
	Partitioned bool
	// MaxPartitions bounds how many partitions are paused at once; a
	// pause of one more is not kept (its calls wait only for their own
	// server delays). Default: [DefaultMaxPartitions].
	MaxPartitions int
	// OnPause, if set, is called when an attempt pauses a partition, or
	// moves its pause's end on by Spread or more ([Pause.Extend]), on the
	// attempt's goroutine and never under a lock: to share the pause with
	// other processes (the redislimit module). It must not block.
	OnPause func(partition string, until time.Time)
	// Clock times the pauses, such as a *clock.Mock in tests (the same as
	// the Retrier's). Default: the real clock.
	Clock clock.Clock
}

// Pause holds every attempt to a downstream, first attempts included,
// while the downstream has said it is rate-limited: when one attempt's
// error carries a server's delay (an HTTP 429 or 503 with Retry-After, a
// gRPC pushback, retry.After), a Retrier whose OverloadOptions has the
// Pause pauses the downstream (or the call's partition) until then, and
// every call that shares the Pause holds its next attempt until the end
// plus a random share of Spread. Build one with [NewPause] and share it
// by all calls to one downstream; it is safe for concurrent use. A nil
// *Pause never pauses.
type Pause struct {
	// ends is the latest end of any pause set since it was last seen
	// over (0: none): a call that finds it 0 pays one atomic load.
	ends  atomic.Int64
	whole atomic.Int64 // the downstream's pause's end, unpartitioned
	parts partitions[int64]
	clock readings
	o     PauseOptions
}

// NewPause returns a Pause, none in force. Invalid options give an error
// that names the problem.
func NewPause(o PauseOptions) (*Pause, error) {
	if o.Spread == 0 {
		o.Spread = time.Second
	}
	if o.Max == 0 {
		o.Max = time.Minute
	}
	if o.MaxPartitions == 0 {
		o.MaxPartitions = DefaultMaxPartitions
	}
	switch {
	case o.Spread < time.Millisecond:
		return nil, fmt.Errorf("overload: the pause's Spread %v is below 1ms: is it in the unit you meant?", o.Spread)
	case o.Max < time.Millisecond:
		return nil, fmt.Errorf("overload: the pause's Max %v is below 1ms: is it in the unit you meant?", o.Max)
	case o.MaxPartitions < 0:
		return nil, fmt.Errorf("overload: the pause's MaxPartitions %d is negative", o.MaxPartitions)
	case o.Clock != nil && isnil.Is(o.Clock):
		return nil, fmt.Errorf("overload: Clock (%T)(nil) is a nil pointer, which cannot tell the time (leave Clock nil for real time)", o.Clock)
	}
	p := &Pause{o: o, clock: newReadings(o.Clock)}
	p.parts.init(o.MaxPartitions)
	return p, nil
}

// Paused reports whether any pause may be in force: false costs one
// atomic load, all that a call pays while its downstream is not paused.
func (p *Pause) Paused() bool { return p != nil && p.ends.Load() != 0 }

// Hold returns how long an attempt of the call whose context is ctx must
// wait before it goes: 0 unless its partition is paused; otherwise the
// rest of the pause and a share of Spread that u, a uniform sample in
// [0, 1), picks (nil: math/rand/v2's). A Retrier passes its own source
// (retry.WithRandom), so that a seeded run holds its calls alike.
func (p *Pause) Hold(ctx context.Context, u func() float64) time.Duration {
	if !p.Paused() {
		return 0
	}
	ends := p.ends.Load()
	now := p.clock.now()
	if now >= ends {
		p.ends.CompareAndSwap(ends, 0) // every pause is over; a new one moved it on
		return 0
	}
	end := p.endFor(ctx)
	if now >= end {
		return 0
	}
	if u == nil {
		u = rand.Float64
	}
	return time.Duration(end-now) + time.Duration(u()*float64(p.o.Spread))
}

// endFor is the end of the pause of ctx's partition (unpartitioned, the
// downstream's), or 0.
func (p *Pause) endFor(ctx context.Context) int64 {
	if !p.o.Partitioned {
		return p.whole.Load()
	}
	key := PartitionOf(ctx)
	s := p.parts.shard(key)
	end := s.m[key]
	s.mu.Unlock()
	return end
}

// Extend pauses the partition of the call whose context is ctx for d
// from now (at most Max), or moves its pause's end on to then; a pause
// that ends later is left as it is. A Retrier calls it when an attempt's
// error carries a server's delay.
func (p *Pause) Extend(ctx context.Context, d time.Duration) {
	if p == nil || d <= 0 {
		return
	}
	key := ""
	if p.o.Partitioned {
		key = PartitionOf(ctx)
	}
	now := p.clock.now()
	end := now + int64(min(d, p.o.Max))
	prev, moved := p.extend(key, end, now)
	if moved && p.o.OnPause != nil && (prev <= now || end-prev >= int64(p.o.Spread)) {
		p.o.OnPause(key, p.clock.at(end))
	}
}

// ExtendUntil pauses partition (or, unpartitioned, the downstream) until
// t, as Extend does, but at most Max from now, and without calling
// OnPause: for a pause that another process shared.
func (p *Pause) ExtendUntil(partition string, t time.Time) {
	if p == nil {
		return
	}
	if !p.o.Partitioned {
		partition = ""
	}
	now := p.clock.now()
	if end := min(p.clock.of(t), now+int64(p.o.Max)); end > now {
		p.extend(partition, end, now)
	}
}

// extend moves key's pause's end on to end, if it ends sooner, and the
// latest end with it; it returns the previous end and whether it moved.
func (p *Pause) extend(key string, end, now int64) (prev int64, moved bool) {
	if key == "" && !p.o.Partitioned {
		prev, moved = raise(&p.whole, end)
	} else {
		s := p.parts.shard(key)
		prev = s.m[key]
		if moved = end > prev; moved {
			moved = s.put(key, end, p.parts.perShard, func(e int64) bool { return e <= now })
		}
		s.mu.Unlock()
	}
	if moved {
		raise(&p.ends, end)
	}
	return prev, moved
}

// raise sets w to v if it is lower, and returns its previous value and
// whether it did.
func raise(w *atomic.Int64, v int64) (int64, bool) {
	for {
		old := w.Load()
		if old >= v {
			return old, false
		}
		if w.CompareAndSwap(old, v) {
			return old, true
		}
	}
}

// Until returns when the pause of ctx's partition ends, or the zero time
// if it is not paused: for metrics and tests.
func (p *Pause) Until(ctx context.Context) time.Time {
	if !p.Paused() {
		return time.Time{}
	}
	now := p.clock.now()
	end := p.endFor(ctx)
	if end <= now {
		return time.Time{}
	}
	return p.clock.at(end)
}
