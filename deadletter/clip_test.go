package deadletter_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// TestSinksBoundErrorTexts: a record built by hand with huge errors is
// stored bounded, its payload whole (issue #20: a 10 MB error over 20
// attempts made one 115 MB record in the file sink).
func TestSinksBoundErrorTexts(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("e", 10<<20)
	dl := testRecord(0)
	dl.Payload = bytes.Repeat([]byte("p"), 1<<20)
	dl.LastError = big
	dl.Attempts = 20
	dl.Errors = nil
	for i := range 20 {
		dl.Errors = append(dl.Errors, retry.AttemptError{Attempt: i + 1, Error: big})
	}
	check := func(t *testing.T, got retry.DeadLetter) {
		t.Helper()
		assert.Equal(t, dl.Payload, got.Payload, "the payload is never cut")
		total := len(got.LastError)
		assert.LessOrEqual(t, len(got.LastError), 4096)
		assert.Contains(t, got.LastError, " bytes cut]…")
		for _, e := range got.Errors {
			assert.LessOrEqual(t, len(e.Error), 4096, "attempt %d", e.Attempt)
			total += len(e.Error)
		}
		assert.LessOrEqual(t, total, 64<<10, "the record's error texts")
		require.NotEmpty(t, got.Errors)
		assert.Equal(t, 1, got.Errors[0].Attempt, "the first attempt is kept")
		assert.Equal(t, 20, got.Errors[len(got.Errors)-1].Attempt, "the last attempt is kept")
		assert.Len(t, dl.Errors, 20, "the caller's record is not changed")
		assert.Len(t, dl.Errors[0].Error, len(big), "the caller's record is not changed")
	}
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		sink := deadletter.NewMemorySink()
		require.NoError(t, sink.Put(t.Context(), dl))
		check(t, sink.Records()[0])
	})
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		sink, path := openFileSink(t, nil)
		require.NoError(t, sink.Put(t.Context(), dl))
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Less(t, st.Size(), int64(len(dl.Payload))*4/3+100<<10, "the line's size")
		got, err := deadletter.ReadFile(path)
		require.NoError(t, err)
		require.Len(t, got, 1)
		check(t, got[0])
	})
	assert.Equal(t, deadletter.Clip(deadletter.Clip(dl)), deadletter.Clip(dl), "Clip is idempotent")
	small := testRecord(1)
	assert.Equal(t, small, deadletter.Clip(small), "a small record is kept as it is")
}
