package pgschema_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgstore/pgschema"
	"github.com/steadfast-go/retry/pgstore/pgschema/pgschematest"
)

func TestParseTable_rule(t *testing.T) {
	pgschematest.TestTableNames(t, func(name string) error {
		if _, err := pgschema.ParseTable(name); err != nil {
			return fmt.Errorf("%w: %w", retry.ErrInvalidOption, err)
		}
		return nil
	})
}

func TestParseTable_errors(t *testing.T) {
	for name, want := range map[string]string{
		"":                             "the table name is empty",
		".idem":                        "the schema name is empty",
		"app.":                         "the table name is empty",
		"Idem":                         "the table name must be a lower-case letter or underscore, then lower-case letters, digits or underscores",
		"App.idem":                     "the schema name must be a lower-case letter",
		"a.b.c":                        "the table name must be a lower-case letter",
		"1idem":                        "the table name must be a lower-case letter",
		strings.Repeat("a", 49):        "the table name is 49 bytes long; at most 48 are allowed",
		strings.Repeat("s", 64) + ".t": "the schema name is 64 bytes long; at most 63 are allowed",
		"user":                         "the table name is a reserved key word of PostgreSQL",
		"select.idem":                  "the schema name is a reserved key word of PostgreSQL",
	} {
		_, err := pgschema.ParseTable(name)
		assert.ErrorContains(t, err, want, "%q", name)
	}
}

func TestTable_parts(t *testing.T) {
	for name, want := range map[string][4]string{ // schema, name, String, Quoted
		"idem":     {"", "idem", "idem", `"idem"`},
		"app.idem": {"app", "idem", "app.idem", `"app"."idem"`},
		"_x9._y":   {"_x9", "_y", "_x9._y", `"_x9"."_y"`},
	} {
		tab, err := pgschema.ParseTable(name)
		require.NoError(t, err)
		assert.Equal(t, want, [4]string{tab.Schema(), tab.Name(), tab.String(), tab.Quoted()}, name)
	}
}

func TestLimits(t *testing.T) {
	assert.Equal(t, 63, pgschema.MaxTableName+pgschema.MaxIndexSuffix, "PostgreSQL's identifier limit")
	assert.Equal(t, 63, pgschema.MaxSchemaName)
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "",
		"plain":               "plain",
		"ünïcode ✓":           "ünïcode ✓",
		"bad\x00byte":         "bad\uFFFDbyte",
		"secret-\xff\xfe-end": "secret-\uFFFD-end",
		"\x00\x00":            "\uFFFD\uFFFD",
		"cut \xe2\x82":        "cut \uFFFD",
		"\uFFFD kept":         "\uFFFD kept",
	} {
		assert.Equal(t, want, pgschema.Text(in), "%q", in)
		assert.True(t, pgschema.Storable(pgschema.Text(in)), "%q", in)
		assert.Equal(t, in == want, pgschema.Storable(in), "%q", in)
	}
}

func TestMigrateRefusesZeroTable(t *testing.T) {
	err := pgschema.Migrate(t.Context(), nil, "test", pgschema.Table{}, "SELECT 1")
	assert.ErrorContains(t, err, "the table has no name")
}
