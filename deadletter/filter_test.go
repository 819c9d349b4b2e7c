package deadletter_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

func record(id, name string, reason retry.Outcome, gaveUp time.Time) retry.DeadLetter {
	return retry.DeadLetter{ID: id, Name: name, Reason: reason, Attempts: 1,
		FirstAttempt: gaveUp.Add(-time.Second), GaveUp: gaveUp, LastError: "boom"}
}

// seedFile stores six records an hour apart, out of order, t0 being the
// oldest, and marks r4 as redriven.
func seedFile(t *testing.T) (*deadletter.FileSink, string, time.Time) {
	t.Helper()
	s, path := openFileSink(t, nil)
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	recs := []retry.DeadLetter{
		record("r0", "charge", retry.OutcomeExhausted, t0),
		record("r1", "charge", retry.OutcomePermanent, t0.Add(1*time.Hour)),
		record("r2", "email", retry.OutcomeExhausted, t0.Add(2*time.Hour)),
		record("r3", "email", retry.OutcomeDeadline, t0.Add(3*time.Hour)),
		record("r4", "charge", retry.OutcomeExhausted, t0.Add(4*time.Hour)),
		record("r5", "ship", retry.OutcomeMaxElapsed, t0.Add(5*time.Hour)),
	}
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		require.NoError(t, s.Put(t.Context(), recs[i]))
	}
	ok, err := s.MarkRedriven(t.Context(), "r4")
	require.NoError(t, err)
	require.True(t, ok)
	return s, path, t0
}

func ids(recs []retry.DeadLetter) []string {
	out := []string{}
	for _, dl := range recs {
		out = append(out, dl.ID)
	}
	return out
}

func TestFileSinkListReportsTornLines(t *testing.T) {
	t.Parallel()
	s, path, _ := seedFile(t)
	appendRaw(t, path, `{"id":"torn`)
	got, err := s.List(t.Context(), deadletter.Filter{Name: "email"})
	var torn *deadletter.TornRecordError
	require.ErrorAs(t, err, &torn, "the records come with the torn lines' report")
	assert.Len(t, torn.Offsets, 1)
	assert.Equal(t, []string{"r2", "r3"}, ids(got))
}

func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestFileSinkPurge checks what a purge does to the file: lines kept byte
// for byte, torn ones too, the markers of purged records dropped, the
// file's mode kept, no temporary file left, later Puts in the new file.
// Which records a purge deletes is the contract suite's
// (TestFileSinkContract, the Purge case), as for every sink.
func TestFileSinkPurge(t *testing.T) {
	t.Parallel()
	s, path, t0 := seedFile(t)
	appendRaw(t, path, "{\"torn\n") // kept byte for byte
	ctx := t.Context()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	left := func() []string {
		recs, err := s.List(ctx, deadletter.Filter{})
		var torn *deadletter.TornRecordError
		if !assert.ErrorAs(t, err, &torn) {
			require.NoError(t, err)
		}
		return ids(recs)
	}
	purge := func(f deadletter.Filter, want int) {
		t.Helper()
		n, err := s.Purge(ctx, f)
		require.NoError(t, err)
		require.Equal(t, want, n, "Purge(%+v)", f)
	}

	purge(deadletter.Filter{IDs: []string{}}, 0)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "nothing selected, nothing rewritten")

	purge(deadletter.Filter{IDs: []string{"r3", "missing"}}, 1)
	// Purging the redriven record drops its redrive marker too.
	purge(deadletter.Filter{State: deadletter.Redriven}, 1)
	after, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(after), `"r4"`)
	assert.NotContains(t, string(after), `"r3"`)
	assert.Contains(t, string(after), "{\"torn\n", "the torn line is kept")
	for line := range bytes.Lines(after) {
		assert.Contains(t, string(before), string(line), "kept lines are unchanged")
	}

	// The sink appends to the new file.
	require.NoError(t, s.Put(ctx, record("r6", "ship", retry.OutcomeExhausted, t0.Add(6*time.Hour))))
	assert.Equal(t, []string{"r0", "r1", "r2", "r5", "r6"}, left())
	ok, err := s.MarkRedriven(ctx, "r6")
	require.NoError(t, err)
	assert.True(t, ok)

	purge(deadletter.Filter{}, 5)
	assert.Empty(t, left())
	after, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "{\"torn\n", string(after))

	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file keeps its permissions")
	tmp, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*.purge-*"))
	require.NoError(t, err)
	assert.Empty(t, tmp, "no temporary file is left behind")

	require.NoError(t, s.Close())
	_, err = s.Purge(ctx, deadletter.Filter{})
	assert.ErrorIs(t, err, os.ErrClosed)
}
