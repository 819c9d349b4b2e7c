package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
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
	printCommands(&out, config{namespace: "notify"}, &backends{sinkName: "file", where: "-file dead.jsonl"}, started, summary{DeadLettered: 1, Exhausted: 1})
	since := printedSince(t, out.String())
	assert.Contains(t, out.String(), "-since 2026-11-29T08:00:00.123456Z")

	f := deadletter.Filter{Since: since}
	at := func(t time.Time) retry.DeadLetter { return retry.DeadLetter{GaveUp: t, Reason: retry.OutcomeExhausted} }
	assert.False(t, f.Match(at(started.Add(-time.Millisecond))), "an earlier run's record of the same second")
	assert.False(t, f.Match(at(started.Add(-123*time.Millisecond))), "an earlier run's record at the second")
	assert.True(t, f.Match(at(started)))
	assert.True(t, f.Match(at(started.Add(500*time.Nanosecond).Truncate(time.Microsecond))), "this run's record, its time truncated by PostgreSQL")
}

// TestSinceSelectsThisRunOnly: the printed -since selects this run's
// dead letters and none of an earlier run's, also those that gave up
// after this run started: an earlier run's virtual time runs ahead of
// the real time (its last jobs give up seconds, up to -deadline, after
// it ended), so this run's clocks start after them.
func TestSinceSelectsThisRunOnly(t *testing.T) {
	t.Parallel()
	earlier := func(key string, d time.Duration) retry.DeadLetter {
		now := time.Now()
		return retry.DeadLetter{ID: deadletter.NewID(), Name: "promo", IdempotencyKey: key, Attempts: 4,
			FirstAttempt: now.Add(d - time.Second), GaveUp: now.Add(d), Reason: retry.OutcomeExhausted, LastError: "503"}
	}
	check := func(t *testing.T, cfg config, put func(retry.DeadLetter), list func(deadletter.Filter) []retry.DeadLetter) {
		put(earlier("notify:earlier-past", -time.Millisecond))
		put(earlier("notify:earlier-ahead", 10*time.Second))
		put(earlier("notify:earlier-just-ahead", 2*time.Second+500*time.Nanosecond))
		s, out := runIn(t, cfg, env{})
		require.Positive(t, s.DeadLettered)
		var keys []string // the records' payloads are no test output
		for _, dl := range list(deadletter.Filter{Since: printedSince(t, out)}) {
			keys = append(keys, dl.IdempotencyKey)
			assert.True(t, strings.HasPrefix(dl.IdempotencyKey, "notify:job-7-"), "-since selects %s, not of this run", dl.IdempotencyKey)
		}
		assert.Len(t, keys, int(s.DeadLettered), "-since selects every record of this run")
	}
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t, "-seed", "7")
		sink, err := deadletter.OpenFile(cfg.deadLetters, nil)
		require.NoError(t, err)
		defer sink.Close()
		check(t, cfg, func(dl retry.DeadLetter) { require.NoError(t, sink.Put(t.Context(), dl)) },
			func(f deadletter.Filter) []retry.DeadLetter {
				recs, err := deadletter.ReadFile(cfg.deadLetters)
				require.NoError(t, err)
				recs, err = f.Select(recs)
				require.NoError(t, err)
				return recs
			})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url, ns := testPostgres(t)
		cfg := testConfig(t, "-seed", "7", "-postgres", url, "-namespace", ns)
		sink, err := pgdeadletter.New(pgdltest.Pool(t), &pgdeadletter.Options{Table: ns + "_dead_letters"})
		require.NoError(t, err)
		require.NoError(t, sink.Migrate(t.Context()))
		check(t, cfg, func(dl retry.DeadLetter) { require.NoError(t, sink.Put(t.Context(), dl)) },
			func(f deadletter.Filter) []retry.DeadLetter {
				recs, err := sink.List(t.Context(), f)
				require.NoError(t, err)
				return recs
			})
	})
}
