package retryhttp_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

// stalled503 is the whole of what stallingServer sends on a connection
// before it stalls: a 503 that promises a body of 1000 bytes.
const stalled503 = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\n"

// stallingServer listens on loopback and answers every request with
// stalled503, then sends nothing more until the client closes the
// connection or the test ends. It returns the URL and a count of the
// requests it got.
func stallingServer(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
		n     int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return // the client closed the connection, or the test ended
					}
					req.Body.Close()
					mu.Lock()
					n++
					mu.Unlock()
					if _, err := io.WriteString(c, stalled503); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// A 503 whose body stalls after its headers does not hang a call without
// an attempt timeout or a deadline: the read ahead of its body has a bound
// of its own (Options.ReadAheadTimeout; 1s by default), after which the
// status stands, as when an attempt timeout cuts it. The request is
// retried, and the caller gets the last 503, whose body reads as what
// came (nothing) and then an error that says it was cut. Observers see
// each attempt end on its status, not a timeout.
func TestStalledBodyIsBoundedWithoutAnAttemptTimeout(t *testing.T) {
	const bound = 20 * time.Millisecond
	url, requests := stallingServer(t)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	obs := &recorder{}
	tr, err := retryhttp.NewTransport(fast(t, 2, retry.WithObserver(obs)), &retryhttp.Options{Base: base, ReadAheadTimeout: bound})
	require.NoError(t, err)

	done := make(chan result, 1)
	start := time.Now()
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(url + "/items")
		done <- result{resp, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second): // a safety net: the call takes about 2 × 20ms
		t.Fatal("the call hangs on a body that never comes")
	}
	elapsed := time.Since(start)
	require.NoError(t, res.err)
	assert.Equal(t, http.StatusServiceUnavailable, res.resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(res.resp))
	assert.Less(t, elapsed, time.Second, "two read aheads of 20ms, not the default bound")
	_, err = io.ReadAll(res.resp.Body)
	assert.ErrorContains(t, err, "not read ahead within the read-ahead timeout")
	require.NoError(t, res.resp.Body.Close())
	assert.Equal(t, 2, requests())
	assertEndsOnStatus(t, obs, 2)
}

// With the defaults, retry.New() and no option, a body that stalls is
// cut after DefaultReadAheadTimeout on each attempt, and the caller gets
// the last 503. In a bubble, with an in-process body that never comes (a
// socket would stop the bubble's fake time), so that the 1s default is
// the real one and the test takes no real time.
func TestStalledBodyWithTheDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var writers []*io.PipeWriter
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			pr, pw := io.Pipe() // nothing is ever written
			writers = append(writers, pw)
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, ContentLength: 1000, Body: pr, Request: r}, nil
		})
		r, err := retry.New()
		require.NoError(t, err)
		tr, err := retryhttp.NewTransport(r, &retryhttp.Options{Base: base})
		require.NoError(t, err)

		start := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get("http://api.test/items")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, 3, retryhttp.Attempts(resp))
		assert.GreaterOrEqual(t, time.Since(start), 3*retryhttp.DefaultReadAheadTimeout, "each attempt's read ahead ran its 1s")
		assert.Less(t, time.Since(start), 3*retryhttp.DefaultReadAheadTimeout+2*time.Second, "then the status stood; the waits between are short")
		_, err = io.ReadAll(resp.Body)
		assert.ErrorContains(t, err, "not read ahead within the read-ahead timeout")
		require.NoError(t, resp.Body.Close())
		require.Len(t, writers, 3)
		for _, pw := range writers {
			pw.Close()
		}
	})
}
