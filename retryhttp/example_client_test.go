package retryhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
)

// A client that retries: the server is unavailable once, then answers.
// Retry-After: 0 tells the client to come back at once.
func Example() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	r, err := retry.New(retry.WithMaxAttempts(3))
	if err != nil {
		panic(err)
	}
	client, err := retryhttp.NewClient(r, nil)
	if err != nil {
		panic(err)
	}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", retryhttp.Attempts(resp), "attempts")
	// Output: 200 hello after 2 attempts
}
