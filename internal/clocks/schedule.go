package clocks

import (
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// Schedule runs each of many entries' Runners at the entry's time, on
// one timer of a clock armed for the earliest: the timer is made at the
// first entry scheduled and reset only for an entry due before it fires.
// Removing entries leaves it armed: when it fires with none due, it arms
// for the earliest left or, with none, stays idle, so an entry added and
// removed before the timer's time costs no timer call. It starts no
// goroutine of its own: the clock's timer runs the entries due, the first
// on the timer's goroutine and each other on a goroutine of its own, so
// that a slow one delays no other; none runs under the Schedule's lock.
// Times are readings of the clock, spans from a fixed point (Init); the
// zero Schedule runs on the real clock. It must not be copied after first use.
type Schedule struct {
	clk  clock.Clock // nil: the real clock
	base time.Time   // clk's reading 0

	mu      sync.Mutex
	heap    []*Entry // the scheduled entries, a binary heap on at
	timer   FuncTimer
	made    bool          // timer exists
	armed   bool          // timer is armed, for armedAt
	armedAt time.Duration // when the timer fires, while armed
}

// Entry is one scheduled function: the zero Entry is not scheduled, and
// an Entry is scheduled at most once at a time. It must not be copied
// after first use.
type Entry struct {
	at      time.Duration // guarded by the Schedule's mu
	idx     int           // place in heap, plus 1; 0: not scheduled
	run     Runner
	running sync.WaitGroup // a run under way
}

// Runner is what an Entry runs when it is due.
type Runner interface{ RunScheduled() }

// Epoch is the real clock's reading 0: set once, at start-up.
var Epoch = time.Now()

// Init sets s's clock before its first use: clk, whose readings are spans
// since base (nil: the real clock, read since Epoch).
func (s *Schedule) Init(clk clock.Clock, base time.Time) {
	s.clk, s.base = clk, base
}

// now reads s's clock.
func (s *Schedule) now() time.Duration {
	if s.clk == nil {
		return time.Since(Epoch) // the monotonic clock only
	}
	return s.clk.Now().Sub(s.base)
}

// Add schedules e to run r at at, a reading of s's clock (at once if at
// has passed), taking it out of the schedule first if it is in it.
func (s *Schedule) Add(e *Entry, at time.Duration, r Runner) {
	s.mu.Lock()
	if e.idx != 0 {
		s.remove(e)
	}
	e.at, e.run = at, r
	e.idx = len(s.heap) + 1
	s.heap = append(s.heap, e)
	s.up(e.idx - 1)
	if !s.armed || at < s.armedAt {
		s.arm()
	}
	s.mu.Unlock()
}

// Remove takes e out of the schedule: once it returns, e's Runner is
// not run until e is added again; a run already begun may still be under
// way (Wait waits for it). The timer stays as it is (see Schedule).
func (s *Schedule) Remove(e *Entry) {
	s.mu.Lock()
	if e.idx != 0 {
		s.remove(e)
	}
	s.mu.Unlock()
}

// Wait waits until no run of e's Runner is under way. After Remove,
// none begins.
func (e *Entry) Wait() { e.running.Wait() }

// arm arms the timer for the earliest entry, or stops it when none is
// scheduled. s.mu is held.
func (s *Schedule) arm() {
	if len(s.heap) == 0 {
		if s.made {
			s.timer.Stop()
		}
		s.armed = false
		return
	}
	at := s.heap[0].at
	d := max(Later(at, -s.now()), 0)
	if s.made {
		s.timer.Reset(d)
	} else {
		s.timer, s.made = AfterFunc(s.clk, d, s.fire), true
	}
	s.armed, s.armedAt = true, at
}

// fire runs the entries due, on the timer's goroutine.
func (s *Schedule) fire() {
	s.mu.Lock()
	now := s.now()
	var first *Entry
	var more []*Entry
	for len(s.heap) > 0 && s.heap[0].at <= now {
		e := s.heap[0]
		s.remove(e)
		e.running.Add(1)
		if first == nil {
			first = e
		} else {
			more = append(more, e)
		}
	}
	s.armed = false
	s.arm()
	s.mu.Unlock()
	for _, e := range more {
		go e.done()
	}
	if first != nil {
		first.done()
	}
}

// done runs e's Runner, as counted in e.running.
func (e *Entry) done() {
	defer e.running.Done()
	e.run.RunScheduled()
}

// remove takes e out of the heap. s.mu is held.
func (s *Schedule) remove(e *Entry) {
	i, last := e.idx-1, len(s.heap)-1
	if i != last {
		s.swap(i, last)
	}
	s.heap[last] = nil
	s.heap = s.heap[:last]
	e.idx = 0
	if i != last {
		s.down(i)
		s.up(i)
	}
}

func (s *Schedule) swap(i, j int) {
	h := s.heap
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i+1, j+1
}

func (s *Schedule) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[i].at >= s.heap[p].at {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Schedule) down(i int) {
	n := len(s.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && s.heap[c+1].at < s.heap[c].at {
			c++
		}
		if s.heap[c].at >= s.heap[i].at {
			return
		}
		s.swap(i, c)
		i = c
	}
}
