package retryslog_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/observertest"
	"github.com/steadfast-go/retry/retryslog"
)

// The logging observer keeps the contract Do relies on, at every level.
func TestObserver_keepsTheObserverContract(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
	observertest.TestObserver(t, func(*testing.T) retry.Observer { return retryslog.New(logger, nil) })
}
