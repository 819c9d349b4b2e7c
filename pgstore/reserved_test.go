package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/steadfast-go/retry/pgstore/pgschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReservedWordsAgainstServer checks the naming rule's promise on the
// test server: every key word it reports as reserved (pg_get_keywords()
// catcode R or T) is refused, and every other key word that the rule
// accepts names the same table unquoted as quoted, as schema and as
// table, in SELECT and INSERT. Options{Table: "user"} and
// Options{Table: "select"} were accepted, though unquoted "FROM user" is the
// current user and "FROM select" a syntax error.
func TestReservedWordsAgainstServer(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	rows, err := pool.Query(ctx, "SELECT word, catcode FROM pg_get_keywords() ORDER BY word")
	require.NoError(t, err)
	type keyword struct{ Word, Catcode string }
	words, err := pgx.CollectRows(rows, pgx.RowToStructByPos[keyword])
	require.NoError(t, err)
	require.NotEmpty(t, words)

	// Every accepted key word becomes a table, in a schema of the test,
	// and a schema with a table t, quoted; unquoted statements then
	// write to them. One script and one query, in a transaction that is
	// rolled back, keep it fast and leave nothing behind.
	schema := tableName(t)
	var script, sums strings.Builder
	script.WriteString("CREATE SCHEMA " + schema + "; SET LOCAL search_path = " + schema + ";\n")
	var accepted []string
	for _, w := range words {
		_, parseErr := pgschema.ParseTable(w.Word)
		if w.Catcode == "R" || w.Catcode == "T" {
			assert.True(t, pgschema.Reserved(w.Word), "%q is reserved (%s) on this server", w.Word, w.Catcode)
			assert.ErrorContains(t, parseErr, "reserved key word", "%q", w.Word)
			continue
		}
		assert.False(t, pgschema.Reserved(w.Word), "%q is not reserved (%s) on this server", w.Word, w.Catcode)
		if parseErr != nil {
			continue
		}
		accepted = append(accepted, w.Word)
		q := pgx.Identifier{w.Word}.Sanitize()
		fmt.Fprintf(&script, "CREATE TABLE %[1]s (x int); CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.t (x int);\n", q)
		fmt.Fprintf(&script, "INSERT INTO %[1]s VALUES (1); INSERT INTO %[2]s.%[1]s SELECT x + 1 FROM %[1]s; INSERT INTO %[1]s.t SELECT sum(x) FROM %[2]s.%[1]s;\n", w.Word, schema)
		if sums.Len() > 0 {
			sums.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&sums, "SELECT '%s', (SELECT sum(x) FROM %s.t)::int", w.Word, q) // key words are [a-z_]
	}
	require.NotEmpty(t, accepted)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, script.String(), pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err, "a key word the rule accepts is not a table name unquoted")
	rows, err = tx.Query(ctx, sums.String(), pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	type total struct {
		Word string
		Sum  int
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[total])
	require.NoError(t, err)
	require.Len(t, got, len(accepted))
	for i, g := range got {
		assert.Equal(t, total{accepted[i], 3}, g, "the unquoted statements reached the quoted table and schema")
	}
}
