package retryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/retryhttp"
)

// A 404 from this API will not change: it is sent once and dead-lettered
// as a permanent failure, and the caller still gets the response.
func ExampleOptions_permanentStatuses() {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()

	sink := deadletter.NewMemorySink()
	r, err := retry.New(retry.WithMaxAttempts(3), retry.WithDeadLetter(sink, nil))
	if err != nil {
		panic(err)
	}
	client, err := retryhttp.NewClient(r, &retryhttp.Options{PermanentStatuses: []int{http.StatusBadRequest, http.StatusNotFound}})
	if err != nil {
		panic(err)
	}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL + "/users/8812")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	dl := sink.Records()[0]
	fmt.Println(resp.StatusCode, "after", retryhttp.Attempts(resp), "attempt")
	fmt.Println("dead letter:", dl.Reason, dl.LastError)
	// Output:
	// 404 after 1 attempt
	// dead letter: permanent retryhttp: permanent status 404 Not Found
}
