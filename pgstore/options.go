package pgstore

import (
	"fmt"
	"reflect"

	"github.com/benbjohnson/clock"
	"github.com/steadfast-go/retry"
)

// DefaultTable is the table a [Store] uses unless [Options.Table] names
// another.
const DefaultTable = "retry_idempotency"

// MaxTableName is the longest table part [Options.Table] accepts, in
// bytes ([pgschema.MaxTableName]), so that the expiry index's name, the
// table's and "_expires_at_idx", fits PostgreSQL's 63.
const MaxTableName = 48

// indexSuffix names the expiry index after the table.
const indexSuffix = "_expires_at_idx"

// Options configures [New]. The zero value, like a nil *Options, gives
// the defaults; zero means the default in every field.
type Options struct {
	// Table is the table that holds the records, as "table" or
	// "schema.table", so that several stores (services, tenants, test
	// runs) can share one database. The name follows the rule of
	// [pgschema], which pgdeadletter follows too: each part a lower-case
	// unquoted SQL identifier (a lower-case letter or underscore, then
	// lower-case letters, digits or underscores) that is not a reserved
	// key word of PostgreSQL ([pgschema.Reserved]), at most
	// [MaxTableName] (48) bytes for the table and 63 for the schema. The
	// name is checked, then quoted; it is never spliced into SQL
	// unchecked. Without a schema the connection's search_path decides.
	// Default (""): [DefaultTable].
	Table string
	// Clock makes the store measure leases and retention on it instead
	// of the PostgreSQL server's clock (now()). Every process sharing the
	// table must then use clocks that agree, so it is meant for tests
	// with a *clock.Mock; production code should keep the default, the
	// server's clock, which all processes share. Times are stored with
	// microsecond precision; leases are rounded up to the next
	// microsecond, never down, and expiries are capped at PostgreSQL's
	// latest timestamp (294276-12-31 23:59:59.999999 UTC). A nil pointer
	// in the interface, such as (*clock.Mock)(nil), cannot tell the time
	// and is refused. Default (nil): the server's clock.
	Clock clock.Clock
}

// invalid returns an error wrapping [retry.ErrInvalidOption] that names
// the problem.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: pgstore: "+format, append([]any{retry.ErrInvalidOption}, args...)...)
}

// isNilPointer reports whether v holds a nil pointer (a *clock.Mock that
// was never made), whose methods would panic at the first call.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
