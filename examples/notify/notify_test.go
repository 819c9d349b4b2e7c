package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/deadletter"
)

// TestSameSeedSameSummary: two runs with one seed print the same table,
// whatever the scheduling; another seed prints another.
func TestSameSeedSameSummary(t *testing.T) {
	t.Parallel()
	first, out := runIn(t, testConfig(t, "-seed", "7"), env{})
	second, _ := runIn(t, testConfig(t, "-seed", "7"), env{})
	assert.Equal(t, first.table(), second.table())
	assert.Contains(t, out, first.table())
	assert.NotContains(t, out, "refused by the limit", "without -limit the table is as it was")

	// The run did what the table says it measures.
	assert.Equal(t, 400, first.Jobs)
	assert.Equal(t, first.Jobs+first.Redelivered, first.Deliveries)
	assert.Positive(t, first.Sent)
	assert.Positive(t, first.RetriedJobs)
	assert.Positive(t, first.Permanent)
	assert.Equal(t, first.Permanent, first.EmptyMessage+first.UnknownUser)
	assert.Positive(t, first.DuplicatesPrevented)
	assert.Zero(t, first.DeliveredTwice, "the idempotency store let a job be sent twice")
	assert.Zero(t, first.EarlierRun, "the memory store starts empty")
	assert.Equal(t, uint64(first.Permanent+first.Exhausted), first.DeadLettered)
	assert.Equal(t, int64(first.Attempts), first.Requests, "every attempt is one request to the service")
	// Each delivery ended one way.
	assert.Equal(t, first.Deliveries, int(first.Sent)+first.Permanent+first.Exhausted+first.Deadline+first.DuplicatesPrevented+first.EarlierRun)

	other, _ := runIn(t, testConfig(t, "-seed", "8"), env{})
	assert.NotEqual(t, first.table(), other.table())
}

// TestDeadLettersAreTheFailedJobs: every job that gave up is in the file,
// with its job ID (in the idempotency key), type, attempts, last error
// and times.
func TestDeadLettersAreTheFailedJobs(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	s, _ := runIn(t, cfg, env{})
	dls, err := deadletter.ReadFile(cfg.deadLetters)
	require.NoError(t, err)
	require.Len(t, dls, int(s.DeadLettered))
	for _, dl := range dls {
		var j job
		require.NoError(t, json.Unmarshal(dl.Payload, &j))
		assert.Equal(t, "notify:"+j.ID, dl.IdempotencyKey)
		assert.Equal(t, j.Type, dl.Name)
		assert.Positive(t, dl.Attempts)
		assert.NotEmpty(t, dl.LastError)
		assert.False(t, dl.GaveUp.Before(dl.FirstAttempt))
		assert.NotContains(t, dl.LastError, j.UserID)
	}
}

// TestLogsHoldNoPersonalData: the retry log (debug level: every retry)
// names no message text, user ID or job ID.
func TestLogsHoldNoPersonalData(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	var logs syncBuffer
	s, _ := runIn(t, cfg, env{log: &logs})
	text := logs.String()
	require.Positive(t, s.Retries)
	for _, want := range []string{`"level":"DEBUG"`, `"level":"WARN"`, `"msg":"retry: attempt failed, retrying"`, `"operation":"promo"`} {
		assert.Contains(t, text, want)
	}
	if s.Exhausted > 0 {
		assert.Contains(t, text, `"level":"ERROR"`)
	}
	for _, j := range generateJobs(cfg.seed, cfg.jobs, cfg.permanentRate) {
		if j.Message != "" {
			require.NotContains(t, text, j.Message)
		}
		require.NotContains(t, text, j.UserID)
		require.NotContains(t, text, j.ID)
	}
}

// TestBadFlags: a bad value exits with status 2 and a message naming the
// flag, never a panic.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-jobs", "0"}, "-jobs 0"},
		{[]string{"-jobs", "many"}, "-jobs"},
		{[]string{"-workers", "-3"}, "-workers -3"},
		{[]string{"-queue", "0"}, "-queue 0"},
		{[]string{"-fail-rate", "1.5"}, "-fail-rate 1.5"},
		{[]string{"-fail-rate", "NaN"}, "-fail-rate NaN"},
		{[]string{"-permanent-rate", "-0.1"}, "-permanent-rate"},
		{[]string{"-seed", "-1"}, "-seed"},
		{[]string{"-deadline", "0s"}, "-deadline"},
		{[]string{"-crash-at", "10"}, "-crash-at needs -redis or -postgres"},
		{[]string{"-crash-at", "-1"}, "-crash-at -1"},
		{[]string{"-fresh"}, "-fresh"},
		{[]string{"-limit", "-river", "postgres://u@host:5432/db"}, "-limit goes without -river"},
		{[]string{"-at-least-once", "-redis", "127.0.0.1:6379"}, "-at-least-once goes with the memory store"},
		{[]string{"-at-least-once", "-postgres", "postgres://u:secret@host:5432/db"}, "-at-least-once goes with the memory store"},
		{[]string{"-redis", "localhost"}, "-redis"},
		{[]string{"-metrics", "9090"}, "-metrics"},
		{[]string{"-postgres", "postgres://u:secret@host:notaport/db"}, "-postgres"},
		{[]string{"-namespace", "Bad-Name"}, "-namespace"},
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"-no-such-flag"}, "-no-such-flag"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(tc.args, strings.NewReader(""), &stdout, &stderr)
		assert.Equal(t, 2, code, "%v: %s", tc.args, stderr.String())
		assert.Contains(t, stderr.String(), tc.want, "%v", tc.args)
		assert.NotContains(t, stderr.String(), "secret", "%v", tc.args)
		assert.Empty(t, stdout.String(), "%v", tc.args)
	}

	var stderr bytes.Buffer
	assert.Equal(t, 0, realMain([]string{"-h"}, strings.NewReader(""), &bytes.Buffer{}, &stderr))
	assert.Contains(t, stderr.String(), "Usage of notify")
	assert.Contains(t, stderr.String(), "-crash-at")
}

// TestResend: the -resend mode of a redrive sends a dead letter's
// payload with the same policy; a job that cannot be sent exits 1.
func TestResend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobs := generateJobs(3, 400, 0.05)
	var good, bad *job
	for _, j := range jobs {
		switch {
		case good == nil && j.Message != "" && validUser.MatchString(j.UserID):
			good = j
		case bad == nil && j.Message == "":
			bad = j
		}
	}
	require.NotNil(t, good)
	require.NotNil(t, bad)
	args := []string{"-resend", "-fail-rate", "0", "-log", filepath.Join(dir, "log")}

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, realMain(args, bytes.NewReader(good.body), &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), good.Type+": sent after 1 attempt(s)")

	stdout.Reset()
	stderr.Reset()
	assert.Equal(t, 1, realMain(args, bytes.NewReader(bad.body), &stdout, &stderr))
	assert.Contains(t, stderr.String(), "permanent after 1 attempt(s), last status 400 Bad Request")
	assert.NotContains(t, stderr.String(), bad.UserID)

	assert.Equal(t, 2, realMain(args, strings.NewReader("not json"), &stdout, &stderr))
}

// TestMetricsServed: -metrics serves the library's metrics and the
// queue's length.
func TestMetricsServed(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s, _ := runIn(t, testConfig(t), env{registry: reg})
	url, stop, err := serveMetrics("127.0.0.1:0", reg)
	require.NoError(t, err)
	defer stop()
	body := httpGet(t, url)
	for _, want := range []string{
		`retry_calls_total{operation="order-shipped",outcome="success"}`,
		`retry_retries_total{operation="promo"}`,
		`retry_dead_letters_total{operation="password-reset",result="recorded"}`,
		"notify_queue_length 0",
	} {
		assert.Contains(t, body, want)
	}
	assert.Positive(t, s.Sent)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(body)
}

func TestDefaultsWriteNothingToTheRepository(t *testing.T) {
	// The defaults put the dead letters and the log in the temporary
	// directory, not in the clone.
	cfg, err := parseFlags(nil, os.Stderr)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(cfg.deadLetters, os.TempDir()))
	assert.True(t, strings.HasPrefix(cfg.logPath, os.TempDir()))
}

// TestSameSeedSameSummaryUnderTheBudget: the shared retry budget refuses
// retries when failures outpace successes, so which calls it refuses
// depends on the order in which the jobs reach it; the timeline fixes
// that order, so runs with one seed print the same table at -fail-rate
// 0.6 too.
func TestSameSeedSameSummaryUnderTheBudget(t *testing.T) {
	t.Parallel()
	runs := parallelRuns(t, 3, "-jobs", "1200", "-fail-rate", "0.6")
	require.Positive(t, runs[0].Refused, "the budget refused nothing: the test shows nothing")
	for _, s := range runs[1:] {
		assert.Equal(t, runs[0].table(), s.table())
	}
}

// TestSameSeedSameSummaryUnderTheLimit: with -limit every attempt takes
// a permit of one overload.Adaptive limit, which changes with the order
// in which the attempts start and end; the timeline fixes that order, so
// runs with one seed print the same table, its refusals by the limit
// included (at -fail-rate 0.9, where it refuses; at 0.3 it refuses
// nothing: FailedShare is set above the service's usual failures). The refused deliveries are in the table, apart from the
// budget's, and in the dead letters.
func TestSameSeedSameSummaryUnderTheLimit(t *testing.T) {
	t.Parallel()
	var runs [2]summary
	var out string
	t.Run("runs", func(t *testing.T) {
		for i := range runs {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				var o string
				runs[i], o = runIn(t, testConfig(t, "-limit", "-fail-rate", "0.9"), env{})
				if i == 0 {
					out = o
				}
			})
		}
	})
	s := runs[0]
	require.Positive(t, s.LimitRefused, "the limit refused nothing: the test shows nothing")
	assert.Equal(t, runs[0].table(), runs[1].table())
	assert.Regexp(t, fmt.Sprintf(`refused by the limit +%d `, s.LimitRefused), out)
	assert.LessOrEqual(t, s.LimitRefusedFirst, s.LimitRefused)
	assert.Equal(t, s.Deliveries, s.accounted())
	assert.Equal(t, uint64(s.unsent()), s.DeadLettered, "a refused job is dead-lettered")
	assert.Regexp(t, `-reason [a-z,-]*\brefused\b`, out, "and can be redriven")
}

// TestEveryJobAccountedFor: with a deadline shorter than the service's
// answers, every call is cut while its request is out (unknown); each
// delivery is still counted in one row, the rows add up to the
// deliveries, and every one not sent is a dead letter.
func TestEveryJobAccountedFor(t *testing.T) {
	t.Parallel()
	s, out := runIn(t, testConfig(t, "-deadline", "10ms", "-redeliver-rate", "0"), env{})
	require.Positive(t, s.Unknown)
	assert.Equal(t, s.Deliveries, s.Succeeded+s.Permanent+s.Exhausted+s.Deadline+s.Refused+s.Unknown+s.DuplicatesPrevented+s.EarlierRun)
	assert.Zero(t, s.Other)
	assert.Equal(t, uint64(s.Deliveries-s.Succeeded-s.DuplicatesPrevented-s.EarlierRun), s.DeadLettered, "a job neither sent nor dead-lettered")
	assert.Regexp(t, fmt.Sprintf(`accounted +%d / %d `, s.Deliveries, s.Deliveries), out)
	assert.NotContains(t, out, "Nothing gave up")
}

// TestAtLeastOnceNeedsTheServiceDedup: with -at-least-once, a redelivery
// of a job whose deadline cut its request (which the service had
// delivered) sends it again once the lease has run out. Without the
// service's dedup the user gets it twice; with it (the default) the
// service answers those repeats from their Idempotency-Key, and the two
// runs are the same run but for who counts the repeats. The service fails
// nothing and has no rate (-service-rate 0), so that a first delivery
// ends sent or unknown, never with a 429's wait past the deadline.
func TestAtLeastOnceNeedsTheServiceDedup(t *testing.T) {
	t.Parallel()
	args := []string{"-jobs", "200", "-at-least-once", "-deadline", "100ms", "-redeliver-rate", "1", "-fail-rate", "0", "-service-rate", "0"}
	off, _ := runIn(t, testConfig(t, append(args, "-service-dedup=false")...), env{})
	on, out := runIn(t, testConfig(t, args...), env{})

	require.Positive(t, off.Unknown)
	assert.Positive(t, off.DeliveredTwice, "no job was sent again: the test shows nothing")
	assert.Zero(t, off.Deduplicated)

	assert.Zero(t, on.DeliveredTwice, "the service's dedup let a job be delivered twice")
	assert.Positive(t, on.Deduplicated)
	assert.Equal(t, off.DeliveredTwice, on.Deduplicated, "each repeat the service answered is one it delivered without dedup")
	assert.Equal(t, off.Sent, on.Sent+on.Deduplicated)
	assert.Equal(t, off.Requests, on.Requests)
	assert.Less(t, on.DuplicatesPrevented, on.Redelivered, "every redelivery was replayed: AtLeastOnce had no effect")
	assert.Regexp(t, fmt.Sprintf(`deduplicated by the service +%d `, on.Deduplicated), out)
	assert.Regexp(t, `delivered twice +0 `, out)
	assert.Contains(t, out, "at least once")
}

// TestAtMostOnceNeedsNoServiceDedup: by default (at most once) the
// idempotency store replays the unknown outcome of a job whose deadline
// cut its request, so -deadline 100ms delivers nothing twice, with the
// service's dedup or without it, and the service never sees a repeat of a
// key it delivered. The service fails nothing and has no rate, as above.
func TestAtMostOnceNeedsNoServiceDedup(t *testing.T) {
	t.Parallel()
	args := []string{"-jobs", "200", "-deadline", "100ms", "-redeliver-rate", "1", "-fail-rate", "0", "-service-rate", "0"}
	for _, dedup := range []string{"-service-dedup=true", "-service-dedup=false"} {
		s, out := runIn(t, testConfig(t, append(args, dedup)...), env{})
		require.Positive(t, s.Unknown, dedup)
		assert.Zero(t, s.DeliveredTwice, dedup)
		assert.Zero(t, s.Deduplicated, dedup)
		assert.Equal(t, s.Redelivered, s.DuplicatesPrevented, "%s: a redelivery of a sent or unknown job ran again", dedup)
		assert.Contains(t, out, "at most once", dedup)
	}
}
