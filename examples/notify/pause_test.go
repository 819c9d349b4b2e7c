package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServiceAnswers429OverItsRate: over its rate, at the virtual time a
// request carries, the push service answers 429 with a Retry-After in
// whole seconds before it looks at the request, which is then no attempt
// of the job's (its failures at random do not move on).
func TestServiceAnswers429OverItsRate(t *testing.T) {
	t.Parallel()
	j := generateJobs(1, 1, 0)[0]
	s, err := newService(1, 0, false, "")
	require.NoError(t, err)
	s.rate = newVirtualRate(2) // one each 500ms, two at once
	at := func(d time.Duration) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/push", bytes.NewReader(j.body))
		req.Header.Set(timeHeader, strconv.FormatInt(int64(d), 10))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w
	}
	assert.Equal(t, http.StatusOK, at(0).Code)
	assert.Equal(t, http.StatusOK, at(0).Code)
	over := at(0)
	require.Equal(t, http.StatusTooManyRequests, over.Code)
	assert.Equal(t, "1", over.Header().Get("Retry-After"), "500ms, in whole seconds")
	assert.Equal(t, http.StatusOK, at(500*time.Millisecond).Code, "room again")
	assert.Equal(t, int64(1), s.limited.Load())
	assert.Equal(t, int64(4), s.requests.Load())
	assert.Equal(t, 3, s.attempts[j.ID], "the 429 counted as an attempt")

	// A request without a virtual time (-river, -resend) has no rate.
	req := httptest.NewRequest(http.MethodPost, "/v1/push", bytes.NewReader(j.body))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	assert.Equal(t, http.StatusOK, w.Code)
}

// TestPauseCutsThe429s: 8 workers send more than the push service's rate
// (15 a second); with the pause (the default) a 429's Retry-After holds
// every job, so far fewer reach the service over its rate than when only
// the job that got one waits. -fail-rate 0 leaves the rate's 429s alone,
// without the service's at random. Measured with these flags, seeds 1 to
// 30: 36 to 54 429s with the pause, 170 to 175 without, at most 0.32 of
// them; the bound is half.
func TestPauseCutsThe429s(t *testing.T) {
	t.Parallel()
	var on, off summary
	var outOn, outOff string
	t.Run("runs", func(t *testing.T) {
		t.Run("pause", func(t *testing.T) {
			t.Parallel()
			on, outOn = runIn(t, testConfig(t, "-workers", "8", "-fail-rate", "0"), env{})
		})
		t.Run("no pause", func(t *testing.T) {
			t.Parallel()
			off, outOff = runIn(t, testConfig(t, "-workers", "8", "-fail-rate", "0", "-pause=false"), env{})
		})
	})
	require.GreaterOrEqual(t, off.TooMany, int64(120), "few 429s without the pause: the test shows nothing")
	assert.LessOrEqual(t, 2*on.TooMany, off.TooMany, "the pause did not halve the 429s: %d with it, %d without", on.TooMany, off.TooMany)
	for _, s := range []summary{on, off} {
		assert.Equal(t, s.TooMany, s.TooManyOverRate, "a 429 at random at -fail-rate 0")
		assert.Equal(t, s.Deliveries, s.accounted())
		assert.Equal(t, int64(s.Attempts), s.Requests, "every attempt is one request to the service")
	}
	assert.Regexp(t, fmt.Sprintf(`429 received +%d +%d over .*\(-pause\)`, on.TooMany, on.TooManyOverRate), outOn)
	assert.Regexp(t, fmt.Sprintf(`429 received +%d +%d over .*\(-pause=false\)`, off.TooMany, off.TooManyOverRate), outOff)
	assert.Contains(t, outOn, "refused by the pause")
	assert.NotContains(t, outOff, "refused by the pause")
}

// TestSameSeedSameSummaryUnderThePause: the pause lets the jobs it held
// go at random within its Spread, from a source no seed sets; the
// timeline lets them go together at its end (vclock.go), so runs with
// one seed print the same table with the pause holding jobs too.
func TestSameSeedSameSummaryUnderThePause(t *testing.T) {
	t.Parallel()
	runs := parallelRuns(t, 3, "-workers", "8", "-service-rate", "10")
	require.Positive(t, runs[0].TooMany, "no 429, no pause: the test shows nothing")
	for _, s := range runs[1:] {
		assert.Equal(t, runs[0].table(), s.table())
	}
}
