package retrymetrics_test

import (
	"fmt"

	"github.com/steadfast-go/retry/retrymetrics"
)

func ExampleNewTable() {
	series, err := retrymetrics.NewTable(2, func(label string) string { return "series of " + label })
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"charge-card", "", "refund", "charge-card"} {
		fmt.Println(series.Get(name))
	}
	// Output:
	// series of charge-card
	// series of unnamed
	// series of other
	// series of charge-card
}
