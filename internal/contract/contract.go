// Package contract holds what the library's contract suites (storetest
// aside) share: running a check from many goroutines at once, and
// failing one that blocks.
package contract

import (
	"sync"
	"testing"
	"time"
)

// Concurrently calls f(w, i) for each of rounds i on each of workers w,
// all workers at once, and returns when all have.
func Concurrently(workers, rounds int, f func(w, i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				f(w, i)
			}
		})
	}
	wg.Wait()
}

// Returns fails t if f does not return within limit: what it checks must
// not block.
func Returns(t testing.TB, what string, limit time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not return within %v: it must not block", what, limit)
	}
}
