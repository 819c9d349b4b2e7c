package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pgTable stores records() in a new table, marks aaaa0004, and returns
// the store flags for it.
func pgTable(t *testing.T) ([]string, *pgdeadletter.Sink) {
	sink := pgdltest.Sink(t, pgdltest.Pool(t))
	for _, dl := range records() {
		require.NoError(t, sink.Put(t.Context(), dl))
	}
	ok, err := sink.MarkRedriven(t.Context(), "aaaa0004")
	require.NoError(t, err)
	require.True(t, ok)
	url, _ := pgdltest.URL()
	return []string{"-postgres", url, "-table", sink.Table()}, sink
}

func TestListShowPostgres(t *testing.T) {
	store, _ := pgTable(t)
	code, stdout, stderr := cli(t, append([]string{"list"}, store...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, []string{"aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004"}, column(stdout))

	code, stdout, stderr = cli(t, append([]string{"list", "-name", "charge", "-since", "2026-11-01T13:00:00Z"}, store...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, []string{"aaaa0003"}, column(stdout))

	code, stdout, stderr = cli(t, append([]string{"show", "aaaa0002"}, store...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "Name:             email")
	assert.Contains(t, stdout, "Payload (17 bytes):\n  line one\n  line two\n")

	code, _, stderr = cli(t, append([]string{"show", "nope"}, store...)...)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "no dead letter with this ID: nope")
}

func TestMissingTablePostgres(t *testing.T) {
	pool := pgdltest.Pool(t)
	url, _ := pgdltest.URL()
	code, _, stderr := cli(t, "list", "-postgres", url, "-table", pgdltest.Table(t, pool))
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "check -table, or create it with pgdeadletter's Sink.Migrate")
}

func TestPurgePostgres(t *testing.T) {
	store, sink := pgTable(t)
	code, stdout, stderr := cli(t, append([]string{"purge", "-reason", "exhausted", "-dry-run"}, store...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, []string{"aaaa0001", "aaaa0003"}, column(stdout))

	code, stdout, _ = cli(t, append([]string{"purge", "-reason", "exhausted", "aaaa0003"}, store...)...)
	require.Equal(t, exitOK, code)
	assert.Equal(t, "purged 1 dead letters\n", stdout, "IDs and filters together narrow")

	code, _, _ = cli(t, append([]string{"purge"}, store...)...)
	assert.Equal(t, exitUsage, code)

	code, stdout, _ = cli(t, append([]string{"purge", "-all"}, store...)...)
	require.Equal(t, exitOK, code)
	assert.Equal(t, "purged 3 dead letters\n", stdout)
	left, err := sink.List(t.Context(), deadletter.Filter{})
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestRedrivePostgres(t *testing.T) {
	store, sink := pgTable(t)
	code, stdout, stderr := cli(t, append([]string{"redrive", "-exec", `test "$DEADLETTER_NAME" != email`, "-attempts", "1"}, store...)...)
	assert.Equal(t, exitFail, code, stderr)
	assert.Equal(t, "redrive: 3 pending, 0 skipped (taken by another redrive), 2 succeeded, 1 failed again (stored as new dead letters), 0 failed and not stored\n", stdout)

	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, "aaaa0002", pending[0].RedriveOf)
	assert.Equal(t, 1, pending[0].Redrives)
	assert.Equal(t, []byte("line one\nline two"), pending[0].Payload)
}

// Two redrives of one table at once replay each record exactly once.
func TestConcurrentRedrivePostgres(t *testing.T) {
	const n = 40
	sink := pgdltest.Sink(t, pgdltest.Pool(t))
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{
			ID: fmt.Sprintf("id%02d", i), Name: "op", GaveUp: start.Add(time.Duration(i) * time.Second),
			Reason: retry.OutcomeExhausted, Attempts: 1,
		}))
	}
	url, _ := pgdltest.URL()
	log := filepath.Join(t.TempDir(), "replays")
	args := []string{"redrive", "-postgres", url, "-table", sink.Table(), "-exec", `echo "$DEADLETTER_ID" >> "` + log + `"`}

	var wg sync.WaitGroup
	codes := make([]int, 2)
	outs := make([]bytes.Buffer, 2)
	for i := range codes {
		wg.Go(func() { codes[i] = run(t.Context(), args, &outs[i], &bytes.Buffer{}) })
	}
	wg.Wait()
	assert.Equal(t, []int{exitOK, exitOK}, codes)

	b, err := os.ReadFile(log)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, id := range strings.Fields(string(b)) {
		seen[id]++
	}
	assert.Len(t, seen, n, "every record replayed")
	for id, c := range seen {
		assert.Equal(t, 1, c, "%s replayed %d times", id, c)
	}
	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// A row pgdeadletter cannot decode (written by hand or by an old bug) does
// not hide the others: list shows them and warns, naming the row's ID.
func TestListWarnsOfAnUndecodableRowPostgres(t *testing.T) {
	store, sink := pgTable(t)
	pool := pgdltest.Pool(t)
	_, err := pool.Exec(t.Context(), "INSERT INTO "+sink.Table()+" (id, name, idempotency_key, attempts, gave_up, reason) VALUES ($1, 'op', '', 1, $2, 'vanished')",
		"bbbb0001", time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	code, stdout, stderr := cli(t, append([]string{"list"}, store...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, []string{"aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004"}, column(stdout))
	assert.Contains(t, stderr, "deadletters: warning:")
	assert.Contains(t, stderr, "bbbb0001")
}
