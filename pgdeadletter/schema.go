package pgdeadletter

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/steadfast-go/retry/pgstore/pgschema"
)

//go:embed schema.sql
var schemaSQL string

// DefaultTable is the table a [Sink] uses unless [Options.Table] names
// another.
const DefaultTable = "retry_dead_letters"

// indexSuffixes name the sink's indexes: the table's name plus a suffix of
// at most pgschema.MaxIndexSuffix bytes, so that the names fit
// PostgreSQL's limit.
var indexSuffixes = [...]string{"_name_idx", "_reason_idx", "_gave_up_idx", "_pending_idx"}

// Schema returns the DDL that creates the sink's table and indexes, with
// their names filled in, for migration tools that manage the schema
// themselves. Every statement in it is idempotent.
func (s *Sink) Schema() string {
	r := []string{"{{table}}", s.table}
	for _, suffix := range indexSuffixes {
		r = append(r, "{{"+suffix[1:]+"}}", pgx.Identifier{s.ident.Name() + suffix}.Sanitize())
	}
	return strings.NewReplacer(r...).Replace(schemaSQL)
}

// Migrate creates the sink's table and indexes when they do not exist and
// changes nothing when they do. Every process may call it at start-up;
// Migrating in the package doc says how concurrent calls are run. A
// named schema must exist already.
func (s *Sink) Migrate(ctx context.Context) error {
	if err := pgschema.Migrate(ctx, s.pool, "pgdeadletter", s.ident, s.Schema()); err != nil {
		return fmt.Errorf("pgdeadletter: migrating %s: %w", s.table, err)
	}
	return nil
}
