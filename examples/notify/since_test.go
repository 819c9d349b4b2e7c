package main

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// printedSince returns the -since of the printed commands, parsed as
// deadletters parses an RFC 3339 time, and checks the two commands agree.
func printedSince(t *testing.T, text string) time.Time {
	t.Helper()
	var since []string
	for _, prefix := range []string{"  go run ./cmd/deadletters list ", "  go run ./cmd/deadletters redrive "} {
		words := commandLine(t, text, prefix)
		i := slices.Index(words, "-since")
		require.Positive(t, i, text)
		since = append(since, words[i+1])
	}
	require.Equal(t, since[0], since[1])
	got, err := time.Parse(time.RFC3339Nano, since[0])
	require.NoError(t, err)
	return got
}

// TestSinceIsTheRunsStart: the printed -since is the run's start to the
// microsecond, so that a record of an earlier run in the same second is
// not selected, and a record of this run is, also after PostgreSQL has
// truncated its time to microseconds.
func TestSinceIsTheRunsStart(t *testing.T) {
	started := time.Date(2026, 11, 29, 8, 0, 0, 123456789, time.UTC)
	var out bytes.Buffer
	printCommands(&out, config{namespace: "notify"}, &backends{sinkName: "file", where: "-file dead.jsonl"}, started, summary{DeadLettered: 1})
	since := printedSince(t, out.String())
	assert.Contains(t, out.String(), "-since 2026-11-29T08:00:00.123456Z")

	f := deadletter.Filter{Since: since}
	at := func(t time.Time) retry.DeadLetter { return retry.DeadLetter{GaveUp: t, Reason: retry.OutcomeExhausted} }
	assert.False(t, f.Match(at(started.Add(-time.Millisecond))), "an earlier run's record of the same second")
	assert.False(t, f.Match(at(started.Add(-123*time.Millisecond))), "an earlier run's record at the second")
	assert.True(t, f.Match(at(started)))
	assert.True(t, f.Match(at(started.Add(500*time.Nanosecond).Truncate(time.Microsecond))), "this run's record, its time truncated by PostgreSQL")
}
