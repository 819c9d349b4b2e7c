// Package parkcost measures what calls parked in a long wait hold (heap
// and goroutine stack, per call) and how long they take to return once
// their context is cancelled: the measure behind the parked-call
// benchmarks of this repository, usable for any retrying code. It is
// test support; nothing in the library imports it.
package parkcost

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Ballast is the number of shallow goroutines parked during a measure.
// The runtime starts new goroutines with a stack of the average size it
// scanned at the last GC, which, with only a test's own goroutines (few,
// with deep stacks), is 4 KB: the ballast keeps that average what it is
// in a program of many small goroutines, so that a call's stack is 2 KB
// unless the call itself needs more.
const Ballast = 1000

// Cost is what one parked call holds, and how long all took to return
// after the cancel.
type Cost struct {
	Heap, Stack float64 // bytes per call: live heap (HeapAlloc), goroutine stack (StackInuse)
	Returned    time.Duration
	// StartStack is the stack new goroutines get once the calls are
	// parked: above 2 KB when a parked call's stack is deep on average.
	StartStack float64
}

// Total is heap and stack per call.
func (c Cost) Total() float64 { return c.Heap + c.Stack }

// Report reports heap, stack and return time, their names prefixed.
func (c Cost) Report(b *testing.B, prefix string) {
	b.ReportMetric(c.Heap, prefix+"heap-B/call")
	b.ReportMetric(c.Stack, prefix+"stack-B/call")
	b.ReportMetric(float64(c.Returned.Microseconds())/1000, prefix+"ms-to-return-all")
}

// Measure runs call on n goroutines with one shared context, waits for
// parked to return (all calls are in their wait), and measures what they
// hold after a GC (which would halve a stack less than a quarter used).
// Then it cancels the context and times their return; every call must
// return an error.
func Measure(n int, call func(context.Context) error, parked func()) (Cost, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var returned sync.WaitGroup
	returned.Add(n)
	var failed atomic.Int64
	var before, after runtime.MemStats
	stopBallast := parkBallast()
	defer stopBallast()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		go func() {
			defer returned.Done()
			if call(ctx) != nil {
				failed.Add(1)
			}
		}()
	}
	parked()
	runtime.GC()
	runtime.ReadMemStats(&after)
	startStack := startingStackSize()
	start := time.Now()
	cancel()
	returned.Wait()
	elapsed := time.Since(start)
	if failed.Load() != int64(n) {
		return Cost{}, fmt.Errorf("%d of %d calls returned an error", failed.Load(), n)
	}
	return Cost{
		Heap:       (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n),
		Stack:      (float64(after.StackInuse) - float64(before.StackInuse)) / float64(n),
		Returned:   elapsed,
		StartStack: startStack,
	}, nil
}

// Waiting is the number of goroutines blocked, the ballast's among them.
func Waiting() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines/waiting:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// startingStackSize is the stack the runtime gives new goroutines, set at
// each GC from the average stack it scanned.
func startingStackSize() float64 {
	s := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64())
}

// parkBallast parks Ballast shallow goroutines until stop is called.
func parkBallast() (stop func()) {
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(Ballast)
	done.Add(Ballast)
	for range Ballast {
		go func() {
			defer done.Done()
			started.Done()
			<-release
		}()
	}
	started.Wait()
	return func() {
		close(release)
		done.Wait()
	}
}
