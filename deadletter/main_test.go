package deadletter_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

var errDead = errors.New("boom")

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
