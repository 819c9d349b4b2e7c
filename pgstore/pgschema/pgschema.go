// Package pgschema holds the table-naming rule, the migration step and
// the rule for free text that the PostgreSQL modules of
// github.com/steadfast-go/retry share: pgstore's idempotency table and
// pgdeadletter's dead-letter table follow the same rule, create their
// tables the same way, and store text that a text column cannot hold
// (invalid UTF-8, NUL bytes) with those bytes replaced ([Text]).
//
// # Table names
//
// A table name is "table" or "schema.table". Each part is a lower-case
// unquoted SQL identifier: a lower-case ASCII letter or an underscore,
// then lower-case ASCII letters, digits or underscores. The table part
// has at most [MaxTableName] (48) bytes, so that the index names made
// from it (the table name and a suffix of at most [MaxIndexSuffix], 15,
// bytes) stay within PostgreSQL's 63-byte limit, which would cut them
// silently; the schema part has at most [MaxSchemaName] (63) bytes.
//
// Neither part may be one of PostgreSQL's reserved key words, such as
// "user", "select" or "order" (see [Reserved]): unquoted, psql reads them
// as something else ("SELECT * FROM user" is the current user). So such a
// name means the same table quoted or not, in psql as in the modules,
// which quote it anyway. Upper case, quotes, spaces, a third part,
// non-ASCII letters, reserved words and longer names are refused, never
// folded, cut or spliced into SQL as given.
//
// # Migrations
//
// [Migrate] runs the DDL in one transaction under a transaction-scoped
// advisory lock, so that processes that start together run it one at a
// time: concurrent CREATE … IF NOT EXISTS statements can fail in
// PostgreSQL. The lock's key is the caller's lock name (such as
// "pgstore") and the table with its schema resolved: its own, or for a
// name without one the schema an unqualified CREATE in the transaction
// creates in, current_schema(). So "t" and "public.t" (when public is
// first in the search path) take the same lock.
package pgschema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Name limits, in bytes. MaxTableName + MaxIndexSuffix is 63, PostgreSQL's
// limit on identifiers (NAMEDATALEN - 1).
const (
	// MaxTableName is the longest table part of a name.
	MaxTableName = 48
	// MaxIndexSuffix is the longest suffix that the modules add to a
	// table name to name its indexes, such as "_expires_at_idx".
	MaxIndexSuffix = 15
	// MaxSchemaName is the longest schema part of a name.
	MaxSchemaName = 63
)

// Table is a table name that follows the rule, split into its parts. Get
// one from [ParseTable]; the zero Table has no name and is not usable. A
// Table is a small value, safe to copy and to use concurrently.
type Table struct {
	schema, name string
}

// ParseTable checks name, "table" or "schema.table", against the rule and
// returns its parts. The error names the problem without a sentinel;
// pgstore and pgdeadletter wrap it with retry.ErrInvalidOption.
func ParseTable(name string) (Table, error) {
	var t Table
	t.name = name
	if i := strings.IndexByte(name, '.'); i >= 0 {
		t.schema, t.name = name[:i], name[i+1:]
		if err := check("schema", t.schema, MaxSchemaName); err != nil {
			return Table{}, err
		}
	}
	if err := check("table", t.name, MaxTableName); err != nil {
		return Table{}, err
	}
	return t, nil
}

// check tells whether s is a lower-case unquoted identifier of at most
// maxLen bytes, and not a reserved key word.
func check(what, s string, maxLen int) error {
	switch {
	case s == "":
		return fmt.Errorf("the %s name is empty", what)
	case len(s) > maxLen:
		return fmt.Errorf("the %s name is %d bytes long; at most %d are allowed", what, len(s), maxLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return errors.New("the " + what + " name must be a lower-case letter or underscore, then lower-case letters, digits or underscores")
		}
	}
	if reserved[s] {
		return errors.New("the " + what + " name is a reserved key word of PostgreSQL, which reads it unquoted as something else; choose another")
	}
	return nil
}

// Schema returns the schema part, or "" for a name without one (the
// connection's search_path decides).
func (t Table) Schema() string { return t.schema }

// Name returns the table part, unquoted.
func (t Table) Name() string { return t.name }

// String returns the name as ParseTable was given it.
func (t Table) String() string {
	if t.schema == "" {
		return t.name
	}
	return t.schema + "." + t.name
}

// Quoted returns the name quoted for SQL, schema-qualified if it has a
// schema: "app"."idem".
func (t Table) Quoted() string {
	if t.schema == "" {
		return pgx.Identifier{t.name}.Sanitize()
	}
	return pgx.Identifier{t.schema, t.name}.Sanitize()
}

// Migrate runs ddl (statements without parameters that create table t,
// and should be idempotent) in one transaction on pool, one process at a
// time per lock name and table (see Migrations in the package doc). ctx bounds the
// transaction; the database's error is returned as it is, for the caller
// to wrap. The zero Table is refused.
func Migrate(ctx context.Context, pool *pgxpool.Pool, lock string, t Table, ddl string) error {
	if t.name == "" {
		return errors.New("the table has no name; get one from ParseTable")
	}
	var schema *string // NULL: the transaction's current_schema()
	if t.schema != "" {
		schema = &t.schema
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// A search path without an existing schema makes
		// current_schema() NULL; the DDL then fails on its own.
		const take = "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || coalesce($2::text, current_schema(), '') || '.' || $3, 0))"
		if _, err := tx.Exec(ctx, take, lock, schema, t.name); err != nil {
			return err
		}
		// No parameters: the simple protocol runs the statements in turn.
		_, err := tx.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol)
		return err
	})
}
