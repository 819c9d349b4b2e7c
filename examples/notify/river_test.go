package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
)

// testRiver returns the URL of the test PostgreSQL and a namespace no
// other run uses (see testPostgres), whose River schema and push service
// table are dropped too when the test ends.
func testRiver(t *testing.T) (string, string) {
	url, ns := testPostgres(t)
	pool := pgdltest.Pool(t)
	t.Cleanup(func() {
		c := config{namespace: ns}
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{riverSchema(c)}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
		_, err = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{pushDeliveriesTable(c)}.Sanitize())
		assert.NoError(t, err)
	})
	return url, ns
}

// riverFinal checks that each of the n jobs of seed 1 is in River once,
// in a final state, and that the dead letters are the discarded ones; it
// returns the counts by state.
func riverFinal(t *testing.T, ns string, n int) (completed, cancelled, discarded int) {
	t.Helper()
	pool := pgdltest.Pool(t)
	c := config{namespace: ns}
	var total, distinct, letters int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT args->>'id'), "+
		"count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'cancelled'), count(*) FILTER (WHERE state = 'discarded') FROM "+
		pgx.Identifier{riverSchema(c), "river_job"}.Sanitize()+" WHERE kind = $1", pushKind).Scan(&total, &distinct, &completed, &cancelled, &discarded))
	assert.Equal(t, n, total, "jobs in River")
	assert.Equal(t, n, distinct, "jobs in River: each once")
	assert.Equal(t, total, completed+cancelled+discarded, "jobs not final")
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{ns + "_dead_letters"}.Sanitize()).Scan(&letters))
	assert.Equal(t, discarded, letters, "a dead letter per discarded job")
	return completed, cancelled, discarded
}

// assertOnce checks that the deliveries recorded in files are each of a
// different job, want in all.
func assertOnce(t *testing.T, want int, files ...string) {
	t.Helper()
	counts := map[string]int{}
	for _, f := range files {
		for _, id := range readDeliveries(t, f) {
			counts[id]++
		}
	}
	for id, n := range counts {
		assert.Equal(t, 1, n, "job %s was delivered %d times", id, n)
	}
	assert.Len(t, counts, want, "jobs delivered")
}

// TestRiver: a -river run works every job to a final state once: done
// (delivered once), cancelled (permanent) or discarded with a dead
// letter; the acknowledgements it loses are replayed, not sent again.
func TestRiver(t *testing.T) {
	t.Parallel()
	url, ns := testRiver(t)
	dir := t.TempDir()
	deliveries := filepath.Join(dir, "deliveries")
	const jobs = 300
	cfg, err := parseFlags(testArgs(dir, "-jobs", strconv.Itoa(jobs), "-workers", "16", "-river", url, "-namespace", ns, "-deliveries", deliveries), io.Discard)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	s, out := runIn(t, cfg, env{registry: reg})
	t.Logf("\n%s", out)
	metrics, stop, err := serveMetrics("127.0.0.1:0", reg)
	require.NoError(t, err)
	defer stop()
	assert.Regexp(t, `retry_calls_total\{operation="[^"]*",outcome="success"\} [1-9]`, httpGet(t, metrics))

	completed, cancelled, discarded := riverFinal(t, ns, jobs)
	assert.Equal(t, jobs, s.Jobs, "jobs finished by the one process")
	assert.Equal(t, completed, s.RiverCompleted)
	assert.Equal(t, cancelled, s.RiverCancelled)
	assert.Equal(t, discarded, s.RiverDiscarded)
	assert.Equal(t, s.Deliveries, s.accounted(), "accounted")
	assert.Equal(t, s.Jobs+s.Redelivered, s.Deliveries, "a delivery per job and per lost acknowledgement")
	assert.Equal(t, completed, s.Succeeded-s.Redelivered+s.DuplicatesPrevented, "completed: sent, or replayed after a lost acknowledgement")
	assert.Equal(t, s.Redelivered, s.DuplicatesPrevented, "each lost acknowledgement replayed")
	assert.Positive(t, s.Redelivered, "no acknowledgement lost: the store is not put to the test")
	assert.Equal(t, cancelled, s.Permanent)
	assert.Equal(t, uint64(discarded), s.DeadLettered)
	assert.Equal(t, int64(completed), s.Sent)
	assert.Equal(t, int64(completed), s.RiverDelivered)
	assert.Zero(t, s.DeliveredTwice)
	assert.Zero(t, s.RiverTwice)
	assertOnce(t, completed, deliveries)
	assert.Regexp(t, `delivered twice +0 `, out)

	// A rerun with the same seed inserts no job again, not even the
	// cancelled and discarded ones, and has nothing to do.
	s, out = runIn(t, cfg, env{})
	assert.Contains(t, out, fmt.Sprintf("inserted       0 of the %d jobs", jobs))
	assert.Zero(t, s.Jobs)
	assert.Zero(t, s.Sent)
	riverFinal(t, ns, jobs)
}

var (
	finishedRE = regexp.MustCompile(`jobs +(\d+) +finished by this process: (\d+) deliveries, (\d+) acknowledgements lost`)
	insertedRE = regexp.MustCompile(`inserted +(\d+) of the`)
	sentRE     = regexp.MustCompile(`sent +(\d+) +notifications the push service delivered for this process; (\d+) for every process`)
)

// TestRiver_twoProcesses: two processes started side by side with the
// same -river and -seed insert the jobs once and share them: each
// finishes some, every job is final once, none is delivered twice, and
// the two summaries add up to the totals.
func TestRiver_twoProcesses(t *testing.T) {
	t.Parallel()
	url, ns := testRiver(t)
	dir := t.TempDir()
	const jobs = 400
	var wg sync.WaitGroup
	outs := make([]string, 2)
	codes := make([]int, 2)
	files := make([]string, 2)
	for i := range 2 {
		files[i] = filepath.Join(dir, fmt.Sprintf("deliveries-%d", i))
		// A fail rate of 20 %: fewer long chains of River waits (a
		// Retry-After is 1 to 3s of real time), so a shorter run.
		args := testArgs(t.TempDir(), "-jobs", strconv.Itoa(jobs), "-workers", "16", "-fail-rate", "0.2", "-river", url, "-namespace", ns, "-deliveries", files[i])
		wg.Go(func() { codes[i], outs[i] = runChild(t, args...) })
	}
	wg.Wait()
	completed, _, _ := riverFinal(t, ns, jobs)
	var finished, sent, inserted, deliveries, lost int
	for i, out := range outs {
		require.Equal(t, 0, codes[i], "process %d:\n%s", i, out)
		t.Logf("process %d:\n%s", i, out)
		m := insertedRE.FindStringSubmatch(out)
		require.NotNil(t, m, "process %d: no inserted line", i)
		n, _ := strconv.Atoi(m[1])
		inserted += n
		m = finishedRE.FindStringSubmatch(out)
		require.NotNil(t, m, "process %d: no jobs row", i)
		n, _ = strconv.Atoi(m[1])
		assert.Positive(t, n, "process %d finished no job", i)
		finished += n
		n, _ = strconv.Atoi(m[2])
		deliveries += n
		n, _ = strconv.Atoi(m[3])
		lost += n
		m = sentRE.FindStringSubmatch(out)
		require.NotNil(t, m, "process %d: no sent row", i)
		n, _ = strconv.Atoi(m[1])
		assert.Positive(t, n, "process %d delivered nothing", i)
		sent += n
		assert.Equal(t, strconv.Itoa(completed), m[2], "process %d: every process's deliveries", i)
		assert.Regexp(t, `delivered twice +0 +by the push service's own count, of this process's deliveries; 0 of every process's`, out)
		assert.Regexp(t, fmt.Sprintf(`jobs in River +%d `, jobs), out)
	}
	assert.Equal(t, jobs, inserted, "jobs inserted by the two: each once")
	assert.Equal(t, jobs, finished, "jobs finished by the two")
	assert.Equal(t, jobs+lost, deliveries, "deliveries by the two: a delivery per job and per lost acknowledgement")
	assert.Equal(t, completed, sent, "notifications delivered by the two")
	assertOnce(t, completed, files...)
}

// handOffFinal checks that every notification of seed 1 ended once: sent
// once by the push service's record, or dead-lettered; none is left in
// River. It returns the jobs by kind and state.
func handOffFinal(t *testing.T, ns string, n int) handOffStates {
	t.Helper()
	pool := pgdltest.Pool(t)
	c := config{namespace: ns, seed: 1, jobs: n}
	st, err := waitHandOffsFinal(t.Context(), pool, c)
	require.NoError(t, err)
	var delivered, twice, letters int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*), count(*) FILTER (WHERE deliveries > 1) FROM "+
		pgx.Identifier{pushDeliveriesTable(c)}.Sanitize()).Scan(&delivered, &twice))
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(DISTINCT idempotency_key) FROM "+pgx.Identifier{ns + "_dead_letters"}.Sanitize()).Scan(&letters))
	assert.Equal(t, n, delivered+letters, "each notification sent or dead-lettered, once")
	assert.Zero(t, twice, "notifications delivered twice")
	assert.Equal(t, n, st.notifications["completed"]+st.notifications["cancelled"]+st.notifications["discarded"], "notification jobs")
	return st
}

var handOffJobsRE = regexp.MustCompile(`hand-off jobs +(\d+) +every process's waits of 1s or more, given back to River: (\d+) completed`)

// TestRiver_handOff: with -handoff each job is one call of Do, whose
// waits of 1s or more (the service's Retry-After) go back to River as
// jobs that the process's HandOffWorker goes on with: every notification
// is sent once or dead-lettered, a lost acknowledgement is replayed, and
// the table counts the hand-offs.
func TestRiver_handOff(t *testing.T) {
	t.Parallel()
	url, ns := testRiver(t)
	const jobs = 300
	cfg := testConfig(t, "-jobs", strconv.Itoa(jobs), "-workers", "16", "-river", url, "-namespace", ns, "-handoff")
	s, out := runIn(t, cfg, env{})
	t.Logf("\n%s", out)
	st := handOffFinal(t, ns, jobs)
	assert.Positive(t, s.HandedOff, "no wait was handed off")
	assert.Equal(t, s.HandedOff, st.handOffs["completed"]+st.handOffs["cancelled"]+st.handOffs["discarded"], "a job per hand-off")
	assert.Positive(t, s.Redelivered, "no acknowledgement lost")
	assert.Equal(t, int64(jobs)-int64(s.DeadLettered), s.Sent, "sent: every notification but the dead-lettered")
	assert.Equal(t, s.Permanent+s.Exhausted, int(s.DeadLettered), "a dead letter per call that gave up")
	m := handOffJobsRE.FindStringSubmatch(out)
	require.NotNil(t, m, "no hand-off row")
	assert.Equal(t, strconv.Itoa(s.HandedOff), m[1])
	assert.Regexp(t, `delivered twice +0 `, out)
}

// TestRiver_handOffTwoProcesses: two -handoff processes share the jobs,
// each going on with waits the other handed off, and deliver nothing
// twice.
func TestRiver_handOffTwoProcesses(t *testing.T) {
	t.Parallel()
	url, ns := testRiver(t)
	const jobs = 400
	var wg sync.WaitGroup
	outs := make([]string, 2)
	codes := make([]int, 2)
	for i := range 2 {
		args := testArgs(t.TempDir(), "-jobs", strconv.Itoa(jobs), "-workers", "16", "-river", url, "-namespace", ns, "-handoff")
		wg.Go(func() { codes[i], outs[i] = runChild(t, args...) })
	}
	wg.Wait()
	st := handOffFinal(t, ns, jobs)
	for i, out := range outs {
		require.Equal(t, 0, codes[i], "process %d:\n%s", i, out)
		t.Logf("process %d:\n%s", i, out)
		assert.Regexp(t, `delivered twice +0 +by the push service's own count, of this process's deliveries; 0 of every process's`, out)
		m := handOffJobsRE.FindStringSubmatch(out)
		require.NotNil(t, m, "process %d: no hand-off row", i)
	}
	assert.Positive(t, st.handOffs["completed"], "no hand-off job completed")
}
