package storetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind, such
// as a fault proxy's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
