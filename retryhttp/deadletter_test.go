package retryhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/retryhttp"
)

// TestDeadLetterNotRecordedIsAnError: when the attempts end on a retryable
// or permanent status and no sink stores the dead letter, RoundTrip
// returns the error that says so, not the response: the caller still has
// the work. The response's body is closed.
func TestDeadLetterNotRecordedIsAnError(t *testing.T) {
	errSink := errors.New("sink down")
	failing := deadletter.Func(func(context.Context, retry.DeadLetter) error { return errSink })
	for name, tc := range map[string]struct {
		code     int
		attempts int
	}{
		"retryable": {http.StatusServiceUnavailable, 2},
		"permanent": {http.StatusNotFound, 1},
	} {
		t.Run(name, func(t *testing.T) {
			var bodies []*closeCounter
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				b := &closeCounter{Reader: strings.NewReader(strings.Repeat("x", retryhttp.DrainLimit+1))} // not read to its end when held
				bodies = append(bodies, b)
				return &http.Response{StatusCode: tc.code, Header: http.Header{}, Body: b, Request: r}, nil
			})
			tr, err := retryhttp.NewTransport(fast(t, 2, retry.WithDeadLetter(failing, nil)), &retryhttp.Options{Base: base, PermanentStatuses: []int{http.StatusNotFound}})
			require.NoError(t, err)

			resp, err := (&http.Client{Transport: tr}).Get("http://api.test/users/8812?token=s3cret")
			require.Error(t, err)
			assert.Nil(t, resp)
			assert.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
			assert.ErrorIs(t, err, errSink)
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.attempts, re.Attempts)
			var se *retryhttp.StatusError
			require.ErrorAs(t, err, &se, "the error names the status")
			assert.Equal(t, tc.code, se.StatusCode)
			require.Len(t, bodies, tc.attempts)
			for i, b := range bodies {
				assert.Equal(t, int32(1), b.closed.Load(), "body %d closed", i+1)
			}
		})
	}
}

// TestDeadLetterRecordedKeepsTheResponse: with a sink that stores the
// record, the caller gets the last response as before.
func TestDeadLetterRecordedKeepsTheResponse(t *testing.T) {
	e := newEnv(t, statuses(http.StatusServiceUnavailable))
	sink := deadletter.NewMemorySink()
	resp, body, err := do(t, e.client(fast(t, 2, retry.WithDeadLetter(sink, nil)), nil), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "response 2", body)
	assert.Equal(t, 1, sink.Len())
}
