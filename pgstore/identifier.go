package pgstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// MaxTableName is the longest table name [WithTable] accepts, in bytes:
// PostgreSQL cuts identifiers at 63 bytes, and the index name adds
// indexSuffix to the table name.
const MaxTableName = 63 - len(indexSuffix)

const indexSuffix = "_expires_at_idx"

// parseTable splits "schema.table" or "table" and checks both parts.
func parseTable(name string) (schema, table string, err error) {
	table = name
	if i := strings.IndexByte(name, '.'); i >= 0 {
		schema, table = name[:i], name[i+1:]
		if err := checkIdentifier("schema", schema, 63); err != nil {
			return "", "", err
		}
	}
	if err := checkIdentifier("table", table, MaxTableName); err != nil {
		return "", "", err
	}
	return schema, table, nil
}

// checkIdentifier accepts lower-case unquoted SQL identifiers only, so the
// name means the same quoted or not, in psql as in the store.
func checkIdentifier(what, s string, maxLen int) error {
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
			return errors.New("the " + what + " name must be a letter or underscore followed by lower-case letters, digits or underscores")
		}
	}
	return nil
}

// quote returns the quoted, possibly schema-qualified identifier.
func quote(schema, name string) string {
	if schema == "" {
		return pgx.Identifier{name}.Sanitize()
	}
	return pgx.Identifier{schema, name}.Sanitize()
}
