package clocks

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// log records which entry ran when, on synctest's clock.
type log struct {
	mu    sync.Mutex
	start time.Time
	ran   []string
}

func (l *log) entry(name string) Runner {
	return runFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.ran = append(l.ran, name+"@"+time.Since(l.start).String())
	})
}

func (l *log) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ran...)
}

type runFunc func()

func (f runFunc) RunScheduled() { f() }

func TestSchedule_runsEachEntryAtItsTimeOnOneTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Schedule
		l := &log{start: time.Now()}
		var a, b, c Entry
		s.Add(&a, s.now()+3*time.Second, l.entry("a"))
		s.Add(&b, s.now()+1*time.Second, l.entry("b"))
		s.Add(&c, s.now()+2*time.Second, l.entry("c"))
		first := s.timer
		s.Remove(&c)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := l.got(); len(got) != 2 || got[0] != "b@1s" || got[1] != "a@3s" {
			t.Fatalf("ran %v, want [b@1s a@3s]", got)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.timer != first {
			t.Fatal("the schedule made a second timer")
		}
		if s.armed || len(s.heap) != 0 {
			t.Fatal("the timer is still armed with nothing scheduled")
		}
	})
}

func TestSchedule_entriesDueTogetherRunApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Schedule
		start := time.Now()
		release := make(chan struct{})
		var a, b Entry
		var ranB time.Duration
		s.Add(&a, s.now()+time.Second, runFunc(func() { <-release }))
		s.Add(&b, s.now()+time.Second, runFunc(func() { ranB = time.Since(start) }))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		close(release)
		a.Wait()
		b.Wait()
		if ranB != time.Second {
			t.Fatalf("b ran at %v, want 1s: a entry that blocks must not hold the others", ranB)
		}
	})
}

// A removed entry does not run; the timer, left armed, fires once with
// nothing due and is then idle.
func TestSchedule_removedEntryDoesNotRunAndTheTimerGoesIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Schedule
		l := &log{start: time.Now()}
		var e Entry
		s.Add(&e, s.now()+time.Second, l.entry("e"))
		s.Remove(&e)
		time.Sleep(time.Minute)
		synctest.Wait()
		e.Wait()
		if got := l.got(); len(got) != 0 {
			t.Fatalf("a removed entry ran: %v", got)
		}
		s.mu.Lock()
		armed := s.armed
		s.mu.Unlock()
		if armed {
			t.Fatal("the timer is armed with nothing scheduled after it fired")
		}
		// Added again, it runs; added twice, once, at its second time.
		s.Add(&e, s.now()+time.Second, l.entry("e"))
		s.Add(&e, s.now()+2*time.Second, l.entry("e"))
		time.Sleep(time.Minute)
		e.Wait()
		if got := l.got(); len(got) != 1 || got[0] != "e@1m2s" {
			t.Fatalf("ran %v, want [e@1m2s]", got)
		}
	})
}

// Many entries in random order run in time order.
func TestSchedule_heapOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Schedule
		const n = 50
		var mu sync.Mutex
		var order []int
		entries := make([]Entry, n)
		for i := range n {
			k := (i * 37) % n // a permutation of 0..n-1
			s.Add(&entries[k], s.now()+time.Duration(k+1)*time.Second, runFunc(func() {
				mu.Lock()
				order = append(order, k)
				mu.Unlock()
			}))
		}
		for k := 0; k < n; k += 7 {
			s.Remove(&entries[k])
		}
		time.Sleep(time.Duration(n+1) * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		prev := -1
		for _, k := range order {
			if k <= prev || k%7 == 0 {
				t.Fatalf("ran in order %v", order)
			}
			prev = k
		}
		if want := n - (n+6)/7; len(order) != want {
			t.Fatalf("%d ran, want %d", len(order), want)
		}
	})
}

// An entry added and removed while the timer is armed for an earlier time
// costs no timer call: the timer keeps its time. One due before it moves it.
func TestSchedule_addAndRemoveLeaveAnEarlierTimerAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Schedule
		var first, e Entry
		s.Add(&first, s.now()+time.Second, runFunc(func() {}))
		s.Remove(&first)
		armedAt := s.armedAt
		for range 3 {
			s.Add(&e, s.now()+2*time.Second, runFunc(func() {}))
			s.Remove(&e)
			if !s.armed || s.armedAt != armedAt {
				t.Fatalf("armed %v at %v, want still armed at %v", s.armed, s.armedAt, armedAt)
			}
		}
		s.Add(&e, s.now()+time.Second/2, runFunc(func() {}))
		if s.armedAt != s.now()+time.Second/2 {
			t.Fatalf("armed at %v for an entry due at %v", s.armedAt, s.now()+time.Second/2)
		}
		s.Remove(&e)
		time.Sleep(time.Minute)
		synctest.Wait()
	})
}
