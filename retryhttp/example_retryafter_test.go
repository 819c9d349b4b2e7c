package retryhttp_test

import (
	"fmt"
	"time"

	"github.com/steadfast-go/retry/retryhttp"
)

func ExampleParseRetryAfter() {
	now := time.Date(2015, 10, 21, 7, 27, 0, 0, time.UTC)
	for _, v := range []string{"120", "Wed, 21 Oct 2015 07:28:00 GMT", "-5", "soon"} {
		d, ok := retryhttp.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "Wed, 21 Oct 2015 07:28:00 GMT": 1m0s true
	// "-5": 0s false
	// "soon": 0s false
}

func ExampleParseRateLimitReset() {
	now := time.Date(2015, 10, 21, 7, 27, 0, 0, time.UTC)
	for _, v := range []string{"30", "1445412480", "1445412000", "soon"} {
		d, ok := retryhttp.ParseRateLimitReset(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "30": 30s true
	// "1445412480": 1m0s true
	// "1445412000": 0s true
	// "soon": 0s false
}
