package pgstore

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

// Schema returns the DDL that creates the store's table and its expiry
// index, with the table name filled in, for migration tools that manage
// the schema themselves. Every statement in it is idempotent.
func (s *Store) Schema() string {
	return strings.NewReplacer(
		"{{table}}", s.name,
		"{{index}}", pgx.Identifier{s.table.Name() + indexSuffix}.Sanitize(),
	).Replace(schemaSQL)
}

// Migrate creates the store's table and index when they do not exist and
// changes nothing when they do. Concurrent calls, from any process, are
// safe; the package doc's Migrating section says how. A named schema
// must exist already.
func (s *Store) Migrate(ctx context.Context) error {
	if err := pgschema.Migrate(ctx, s.pool, "pgstore", s.table, s.Schema()); err != nil {
		return fmt.Errorf("pgstore: migrate %s: %w", s.name, err)
	}
	return nil
}
