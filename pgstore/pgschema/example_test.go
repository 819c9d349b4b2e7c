package pgschema_test

import (
	"fmt"

	"github.com/steadfast-go/retry/pgstore/pgschema"
)

func ExampleParseTable() {
	for _, name := range []string{"billing.idempotency", "Billing"} {
		t, err := pgschema.ParseTable(name)
		if err != nil {
			fmt.Printf("%s: %v\n", name, err)
			continue
		}
		fmt.Println(t.Schema(), t.Name(), t.Quoted())
	}
	// Output:
	// billing idempotency "billing"."idempotency"
	// Billing: the table name must be a lower-case letter or underscore, then lower-case letters, digits or underscores
}
