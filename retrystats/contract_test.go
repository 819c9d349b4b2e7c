package retrystats_test

import (
	"testing"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/observertest"
	"github.com/steadfast-go/retry/retrystats"
)

// Stats keeps the contract Do relies on, and its gauges come back to 0.
func TestStats_keepsTheObserverContract(t *testing.T) {
	st := new(retrystats.Stats)
	observertest.TestObserver(t, func(*testing.T) retry.Observer { return st })
	s := st.Snapshot()
	if s.InFlight != 0 || s.Waiting != 0 {
		t.Errorf("after every call ended: %d in flight, %d waiting; want 0 and 0", s.InFlight, s.Waiting)
	}
}
