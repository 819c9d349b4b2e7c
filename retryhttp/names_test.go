package retryhttp_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/retryhttp"
	"github.com/steadfast-go/retry/retryslog"
)

func TestObserversSeeMethodAndHostOnly(t *testing.T) {
	e := newEnv(t, statuses(503, 200))
	rec := &recorder{}
	c := e.client(fast(t, 3, retry.WithObserver(rec)), nil)
	host := strings.TrimPrefix(e.srv.URL, "http://")
	_, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL+"/users/8812/cards?token=s3cret", nil))
	require.NoError(t, err)
	_, _, err = do(t, c, newRequest(t, context.Background(), http.MethodDelete, e.srv.URL+"/users/8812", nil))
	require.NoError(t, err)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	var names []string
	for _, s := range rec.starts {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"GET " + host, "GET " + host, "DELETE " + host}, names)
	require.Len(t, rec.done, 2)
	assert.Equal(t, "GET "+host, rec.done[0].Name)
	assert.Equal(t, 2, rec.done[0].Attempts)
	assert.Equal(t, retry.OutcomeSuccess, rec.done[0].Outcome)
	require.Len(t, rec.ends, 3)
	var se *retryhttp.StatusError
	require.ErrorAs(t, rec.ends[0].Err, &se, "observers see the status as the attempt's error")
	assert.Equal(t, 503, se.StatusCode)
}

func TestOperationNameNamesRequests(t *testing.T) {
	e := newEnv(t, statuses(200))
	rec := &recorder{}
	c := e.client(fast(t, 3, retry.WithObserver(rec)), &retryhttp.Options{OperationName: func(r *http.Request) string {
		return "users-api " + strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)[0]
	}})
	for _, p := range []string{"/users/1", "/users/2", "/cards/3"} {
		_, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL+p, nil))
		require.NoError(t, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.done, 3)
	assert.Equal(t, []string{"users-api users", "users-api users", "users-api cards"},
		[]string{rec.done[0].Name, rec.done[1].Name, rec.done[2].Name})
}

// A Retrier built with retry.WithName keeps its name: its observers and
// dead letters see "charge", not "POST host", so the dead letters of HTTP
// calls can be told apart and redriven by operation. Options.OperationName,
// the Transport's own option, still wins over it.
func TestRetrierNameIsKept(t *testing.T) {
	e := newEnv(t, statuses(http.StatusServiceUnavailable))
	rec := &recorder{}
	sink := deadletter.NewMemorySink()
	r := fast(t, 2, retry.WithName("charge"), retry.WithObserver(rec), retry.WithDeadLetter(sink, nil))
	req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL+"/charges", strings.NewReader("pay"))
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "order-17")
	resp, _, err := do(t, e.client(r, nil), req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(resp))

	require.Equal(t, 1, sink.Len())
	assert.Equal(t, "charge", sink.Records()[0].Name)
	rec.mu.Lock()
	require.Len(t, rec.starts, 2)
	require.Len(t, rec.done, 1)
	assert.Equal(t, []string{"charge", "charge", "charge"}, []string{rec.starts[0].Name, rec.starts[1].Name, rec.done[0].Name})
	rec.mu.Unlock()

	_, _, err = do(t, e.client(r, &retryhttp.Options{OperationName: func(*http.Request) string { return "payments" }}), newRequest(t, context.Background(), http.MethodGet, e.srv.URL, nil))
	require.NoError(t, err)
	require.Equal(t, 2, sink.Len())
	assert.Equal(t, "payments", sink.Records()[1].Name)
}

func TestManyNamesStayCorrectPastTheCache(t *testing.T) {
	e := newEnv(t, statuses(200))
	rec := &recorder{}
	c := e.client(fast(t, 1, retry.WithObserver(rec)), &retryhttp.Options{OperationName: func(r *http.Request) string {
		return r.URL.Query().Get("op")
	}})
	const n = 300 // more than the Transport keeps
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := do(t, c, newRequest(t, context.Background(), http.MethodGet, e.srv.URL+"/?op=op"+strconv.Itoa(i%(n/2)), nil))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	counts := map[string]int{}
	for _, d := range rec.done {
		counts[d.Name]++
	}
	assert.Len(t, counts, n/2)
	for name, c := range counts {
		assert.Equal(t, 2, c, name)
	}
}

func TestSlogObserverLogsNoHeaderValuesPathsOrQueries(t *testing.T) {
	e := newEnv(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "0")
		w.Header().Set("Set-Cookie", "session=c00kie")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := fast(t, 3, retry.WithObserver(retryslog.New(logger, nil)))
	req := newRequest(t, context.Background(), http.MethodPost, e.srv.URL+"/accounts/ACC-99/charge?card=4242424242424242", strings.NewReader("amount=10"))
	req.Header.Set("Authorization", "Bearer t0ken")
	req.Header.Set(retryhttp.IdempotencyKeyHeader, "idem-7f3a")
	resp, _, err := do(t, e.client(r, nil), req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	logs := buf.String()
	require.Contains(t, logs, "retry: attempt failed, retrying")
	require.Contains(t, logs, "retry: gave up")
	assert.Contains(t, logs, `"operation":"POST `+strings.TrimPrefix(e.srv.URL, "http://")+`"`)
	assert.Contains(t, logs, "429 Too Many Requests")
	for _, secret := range []string{"t0ken", "idem-7f3a", "ACC-99", "4242424242424242", "c00kie", "amount", url.QueryEscape("card=4242424242424242")} {
		assert.NotContains(t, logs, secret)
	}
}
