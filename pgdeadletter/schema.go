package pgdeadletter

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/steadfast-go/retry"
)

//go:embed schema.sql
var schemaSQL string

// DefaultTable is the table a [Sink] uses when [WithTable] is not given.
const DefaultTable = "retry_dead_letters"

// indexSuffixes name the sink's indexes: the table's name plus a suffix.
var indexSuffixes = [...]string{"_name_idx", "_reason_idx", "_gave_up_idx", "_pending_idx"}

// maxIdentifier is PostgreSQL's limit on identifier length (NAMEDATALEN-1).
// Longer names are cut silently, so two long table names could share
// index names; such names are refused instead.
const maxIdentifier = 63

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseTable checks a table name, "table" or "schema.table", and returns
// its parts. Only plain identifiers are accepted, so the name can be
// quoted safely into SQL.
func parseTable(name string) (pgx.Identifier, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: pgdeadletter: table %q: use table or schema.table", retry.ErrInvalidOption, name)
	}
	longest := 0
	for _, s := range indexSuffixes {
		longest = max(longest, len(s))
	}
	for i, p := range parts {
		if !identifier.MatchString(p) {
			return nil, fmt.Errorf("%w: pgdeadletter: table %q: %q must be letters, digits and underscores, not starting with a digit", retry.ErrInvalidOption, name, p)
		}
		limit := maxIdentifier
		if i == len(parts)-1 {
			limit -= longest // room for the index names
		}
		if len(p) > limit {
			return nil, fmt.Errorf("%w: pgdeadletter: table %q: %q is longer than %d characters", retry.ErrInvalidOption, name, p, limit)
		}
	}
	return pgx.Identifier(parts), nil
}

// Schema returns the DDL that creates the sink's table and indexes, with
// their names filled in, for migration tools that manage the schema
// themselves. Every statement in it is idempotent.
func (s *Sink) Schema() string {
	table := s.ident[len(s.ident)-1]
	r := []string{"{{table}}", s.table}
	for _, suffix := range indexSuffixes {
		r = append(r, "{{"+suffix[1:]+"}}", pgx.Identifier{table + suffix}.Sanitize())
	}
	return strings.NewReplacer(r...).Replace(schemaSQL)
}

// Migrate creates the sink's table and indexes when they do not exist and
// changes nothing when they do, so every process may call it at start-up.
// A transaction-scoped advisory lock on the table's name runs concurrent
// calls one at a time, since concurrent CREATE … IF NOT EXISTS statements
// can fail in PostgreSQL. A named schema must exist already.
func (s *Sink) Migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "pgdeadletter:"+s.table); err != nil {
			return err
		}
		// No parameters: the simple protocol runs the statements in turn.
		_, err := tx.Exec(ctx, s.Schema(), pgx.QueryExecModeSimpleProtocol)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgdeadletter: migrating %s: %w", s.table, err)
	}
	return nil
}
