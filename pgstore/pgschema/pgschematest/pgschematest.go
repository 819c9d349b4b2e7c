// Package pgschematest checks that a constructor follows the table-naming
// rule of [pgschema]: the tests of pgstore and pgdeadletter run the same
// names through their own table option (pgstore.Options.Table,
// pgdeadletter.Options.Table), so that both accept and refuse the
// same ones; and it has the helpers their Migrate tests share (AppPool,
// LockWaits). It needs only the standard library's testing package and
// pgx, which pgstore requires anyway: no test library enters a user's
// module graph through it.
package pgschematest

import (
	"errors"
	"strings"
	"testing"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgstore/pgschema"
)

// Valid returns names that the rule accepts, the longest allowed included.
func Valid() []string {
	return []string{
		"a", "_", "_x9", "dead_letters", "retry_idempotency", "public.dead_letters", "app.idem", "_s.t_1",
		"key", "name", "between", "values", "between.values", // key words that are not reserved
		strings.Repeat("t", pgschema.MaxTableName),
		strings.Repeat("s", pgschema.MaxSchemaName) + "." + strings.Repeat("t", pgschema.MaxTableName),
	}
}

// Invalid returns names that the rule refuses: empty parts, upper case,
// a leading digit, SQL and quotes, other characters, a third part,
// reserved key words, and parts one byte too long.
func Invalid() []string {
	return []string{
		"", ".", ".t", "s.", "9lives", "s.9lives", "Idem", "Mixed_Case9", "app.Idem", "App.idem",
		"a.b.c", "x; DROP TABLE users", `x"y`, "a-b", "a b", "a\x00b", "ünïcode", "tab\tle",
		"user", "select", "order", "table", "left", "system_user", "public.user", "user.idem",
		strings.Repeat("t", pgschema.MaxTableName+1),
		strings.Repeat("s", pgschema.MaxSchemaName+1) + ".t",
	}
}

// TestTableNames calls newWithTable with every name of [Valid] and
// [Invalid]: it must return nil for the first, and an error wrapping
// retry.ErrInvalidOption for the others. newWithTable builds whatever is
// under test with the table name, without touching a database.
func TestTableNames(t *testing.T, newWithTable func(name string) error) {
	t.Helper()
	for _, name := range Valid() {
		if err := newWithTable(name); err != nil {
			t.Errorf("table name %q: %v, want it accepted", name, err)
		}
	}
	for _, name := range Invalid() {
		if err := newWithTable(name); !errors.Is(err, retry.ErrInvalidOption) {
			t.Errorf("table name %q: %v, want an error wrapping retry.ErrInvalidOption", name, err)
		}
	}
}
