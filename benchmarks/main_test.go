package benchmarks

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test, or any peer library under test,
// leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
