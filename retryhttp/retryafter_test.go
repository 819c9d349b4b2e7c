package retryhttp_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry/retryhttp"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "120", 2 * time.Minute, true},
		{"zero", "0", 0, true},
		{"spaces", "  5 ", 5 * time.Second, true},
		{"imf_fixdate", "Sun, 29 Nov 2026 12:02:00 GMT", 2 * time.Minute, true},
		{"rfc850", "Sunday, 29-Nov-26 12:00:30 GMT", 30 * time.Second, true},
		{"asctime", "Sun Nov 29 12:01:00 2026", time.Minute, true},
		{"past_date", "Sun, 29 Nov 2026 11:00:00 GMT", 0, true},
		{"huge", "99999999999999999999999", time.Duration(math.MaxInt64), true},
		{"beyond_duration", "9223372037", time.Duration(math.MaxInt64), true},
		{"negative", "-5", 0, false},
		{"fraction", "1.5", 0, false},
		{"garbage", "soon", 0, false},
		{"empty", "", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retryhttp.ParseRetryAfter(tc.value, now)
			assert.Equal(t, tc.wantOK, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

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
