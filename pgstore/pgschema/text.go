package pgschema

import (
	"strings"
	"unicode/utf8"
)

// Storable reports whether a PostgreSQL text column can hold s as it is:
// s is valid UTF-8 and has no NUL byte. Sending any other string as text
// fails with SQLSTATE 22021, in an error that quotes the offending bytes.
func Storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// Text returns s with each invalid UTF-8 sequence and each NUL byte
// replaced by U+FFFD, so that a text column can hold it; a [Storable] s is
// returned as it is. The modules store free text (error messages above
// all) this way rather than failing, and losing, the write.
func Text(s string) string {
	if Storable(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
