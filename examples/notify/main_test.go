package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// A child process runs the command itself (see runChild); leak
		// checks belong to the parent.
		os.Exit(realMain(childArgs(), os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
