package latency

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestNth_isTheKthOfTheSorted(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for n := 1; n < 200; n++ {
		s := make([]int64, n)
		for i := range s {
			s[i] = rnd.Int64N(int64(n)) // repeats included
		}
		sorted := slices.Sorted(slices.Values(s))
		for k := range n {
			if got := nth(slices.Clone(s), k); got != sorted[k] {
				t.Fatalf("n=%d k=%d: nth = %d, want %d", n, k, got, sorted[k])
			}
		}
	}
}

func TestLatencies_delayIsThePercentileOfTheWindow(t *testing.T) {
	l := New(80, 0.95, time.Millisecond) // recomputed every 10
	for i := range 9 {
		l.Record(time.Duration(i+1) * time.Millisecond)
	}
	if d := l.delay.Load(); d != 0 {
		t.Fatalf("before 10 latencies: delay %v, want none", time.Duration(d))
	}
	for i := 9; i < 80; i++ {
		l.Record(time.Duration(i+1) * time.Millisecond) // 1..80ms
	}
	if d := time.Duration(l.delay.Load()); d != 76*time.Millisecond {
		t.Fatalf("delay %v, want 76ms, the 76th of 80", d)
	}
	for range 80 { // the window moves on: 80 latencies of 2ms
		l.Record(2 * time.Millisecond)
	}
	if d := time.Duration(l.delay.Load()); d != 2*time.Millisecond {
		t.Fatalf("delay %v, want 2ms", d)
	}
	for range 80 {
		l.Record(time.Microsecond)
	}
	if d := time.Duration(l.delay.Load()); d != time.Millisecond {
		t.Fatalf("delay %v, want the floor, 1ms", d)
	}
}
