package pgschema

// reserved holds PostgreSQL's reserved key words: those that cannot be an
// unquoted table or schema name, because the parser reads them as
// something else ("FROM user" is the current user, "FROM select" a
// syntax error). They are the words src/include/parser/kwlist.h lists as
// RESERVED_KEYWORD or TYPE_FUNC_NAME_KEYWORD, which pg_get_keywords()
// reports with catcode 'R' and 'T' and Appendix C of the manual ("SQL Key
// Words") marks "reserved" and "reserved (can be function or type)":
// PostgreSQL 15's list, plus system_user, reserved since 16. The other key
// words (unreserved, and "non-reserved (cannot be function or type)")
// name a table, unquoted, like any identifier. pgstore's tests compare
// the list with the server's pg_get_keywords().
var reserved = map[string]bool{
	"all": true, "analyse": true, "analyze": true, "and": true, "any": true,
	"array": true, "as": true, "asc": true, "asymmetric": true,
	"authorization": true, "binary": true, "both": true, "case": true,
	"cast": true, "check": true, "collate": true, "collation": true,
	"column": true, "concurrently": true, "constraint": true, "create": true,
	"cross": true, "current_catalog": true, "current_date": true,
	"current_role": true, "current_schema": true, "current_time": true,
	"current_timestamp": true, "current_user": true, "default": true,
	"deferrable": true, "desc": true, "distinct": true, "do": true,
	"else": true, "end": true, "except": true, "false": true, "fetch": true,
	"for": true, "foreign": true, "freeze": true, "from": true, "full": true,
	"grant": true, "group": true, "having": true, "ilike": true, "in": true,
	"initially": true, "inner": true, "intersect": true, "into": true,
	"is": true, "isnull": true, "join": true, "lateral": true,
	"leading": true, "left": true, "like": true, "limit": true,
	"localtime": true, "localtimestamp": true, "natural": true, "not": true,
	"notnull": true, "null": true, "offset": true, "on": true, "only": true,
	"or": true, "order": true, "outer": true, "overlaps": true,
	"placing": true, "primary": true, "references": true, "returning": true,
	"right": true, "select": true, "session_user": true, "similar": true,
	"some": true, "symmetric": true, "system_user": true, "table": true,
	"tablesample": true, "then": true, "to": true, "trailing": true,
	"true": true, "union": true, "unique": true, "user": true, "using": true,
	"variadic": true, "verbose": true, "when": true, "where": true,
	"window": true, "with": true,
}

// Reserved reports whether word is one of PostgreSQL's reserved key
// words, which the naming rule refuses as a table or schema name.
func Reserved(word string) bool { return reserved[word] }
