package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// push sends j to s with the Idempotency-Key key ("" for none) and
// returns the answer.
func push(t *testing.T, s *service, j *job, key string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/push", bytes.NewReader(j.body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	return w
}

// TestServiceDedupsByIdempotencyKey: with dedup, the push service
// delivers a key once and answers its repeats as delivered, marked as
// Stripe marks a replay; the per-job count of real deliveries still
// counts a job sent under two keys twice. Without dedup it delivers every
// request.
func TestServiceDedupsByIdempotencyKey(t *testing.T) {
	t.Parallel()
	j := generateJobs(1, 1, 0)[0] // no permanent failures: a valid job

	s, err := newService(1, 0, true, "")
	require.NoError(t, err)
	first := push(t, s, j, j.ID)
	assert.Empty(t, first.Header().Get(replayedHeader))
	again := push(t, s, j, j.ID)
	assert.Equal(t, "true", again.Header().Get(replayedHeader))
	assert.Equal(t, first.Body.String(), again.Body.String(), "a replay answers as the first did")
	assert.Equal(t, int64(1), s.deliveries.Load())
	assert.Equal(t, int64(1), s.deduped.Load())
	assert.Zero(t, s.duplicates.Load())

	push(t, s, j, "another-key")
	push(t, s, j, "")
	assert.Equal(t, int64(3), s.deliveries.Load(), "another key, or none, is delivered")
	assert.Equal(t, int64(2), s.duplicates.Load(), "the job's own count of deliveries")
	assert.Equal(t, int64(1), s.deduped.Load())

	off, err := newService(1, 0, false, "")
	require.NoError(t, err)
	push(t, off, j, j.ID)
	again = push(t, off, j, j.ID)
	assert.Empty(t, again.Header().Get(replayedHeader))
	assert.Equal(t, int64(2), off.deliveries.Load())
	assert.Equal(t, int64(1), off.duplicates.Load())
	assert.Zero(t, off.deduped.Load())
}
