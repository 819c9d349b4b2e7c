package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// simulated goroutine must have returned when a simulation ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
