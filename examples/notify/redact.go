package main

import (
	"errors"
	"strings"
)

// The printed commands repeat the -postgres connection string, so they
// must not repeat its secrets. pgx reads a password from four places in
// it: the userinfo of a URL (postgres://user:PASSWORD@host/db), the
// password query parameter of a URL (?password=PASSWORD), and the
// password keyword of a keyword/value string (password=PASSWORD, or
// password='PASS WORD' quoted, with backslash escapes); sslpassword, the
// passphrase of the client key, can be a query parameter or a keyword
// too. redactConn finds them the way pgx's parser does (pgconn's
// parseURLSettings and parseKeywordValueSettings) and removes them, so
// that the command works once the user gives them in the environment:
// pgx reads PGPASSWORD (or ~/.pgpass) and PGSSLPASSWORD.

// redacted says which secrets redactConn removed.
type redacted struct{ password, sslPassword bool }

func (r redacted) any() bool { return r.password || r.sslPassword }

// redactedPlaceholder stands for a connection string that redactConn
// could not take apart with certainty: printed instead of it, it shows
// nothing of it.
const redactedPlaceholder = "YOUR-POSTGRES-CONNECTION-STRING"

// redactConn returns the connection string s without the secrets pgx
// would read from it, and which it removed. A string it cannot parse as
// pgx does, or one of secrets only, comes back as redactedPlaceholder,
// never as it is.
func redactConn(s string) (string, redacted) {
	var (
		out string
		r   redacted
		err error
	)
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		out, r, err = redactConnURL(s)
	} else {
		out, r, err = redactKeywordValue(s)
	}
	switch {
	case err != nil:
		return redactedPlaceholder, redacted{password: true}
	case out == "":
		// Nothing but secrets: an empty -postgres is no -postgres to
		// deadletters and notify.
		return redactedPlaceholder, r
	}
	return out, r
}

var errAmbiguous = errors.New("notify: a connection string redactConn cannot take apart")

// redactConnURL redacts a URL as pgx parses it: the userinfo ends at the
// first '@' before any '/', its password after its first ':'; the query
// starts at the first '?' after the hosts (a bracketed IPv6 host may hold
// one); its parameters are '&'-separated and their keys percent-encoded.
func redactConnURL(s string) (string, redacted, error) {
	var r redacted
	if strings.IndexByte(s, 0) >= 0 {
		return "", r, errAmbiguous
	}
	prefix := "postgresql://"
	p, ok := strings.CutPrefix(s, prefix)
	if !ok {
		prefix = "postgres://"
		p, _ = strings.CutPrefix(s, prefix)
	}
	var b strings.Builder
	b.WriteString(prefix)
	if i := strings.IndexAny(p, "@/"); i >= 0 && p[i] == '@' {
		user, password, _ := strings.Cut(p[:i], ":")
		r.password = password != "" // pgx ignores an empty one
		b.WriteString(user)
		b.WriteByte('@')
		p = p[i+1:]
	}
	qi := urlQueryStart(p)
	hosts := p
	if qi >= 0 {
		hosts = p[:qi]
	}
	if netloc, _, _ := strings.Cut(hosts, "/"); !plainHosts(netloc) {
		return "", r, errAmbiguous
	}
	if qi < 0 {
		b.WriteString(p)
		return b.String(), r, nil
	}
	b.WriteString(p[:qi])
	var kept []string
	for pair := range strings.SplitSeq(p[qi+1:], "&") {
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		switch percentDecode(rawKey) {
		case "password":
			r.password = r.password || rawValue != ""
		case "sslpassword":
			r.sslPassword = r.sslPassword || rawValue != ""
		default:
			kept = append(kept, pair)
		}
	}
	if len(kept) > 0 {
		b.WriteByte('?')
		b.WriteString(strings.Join(kept, "&"))
	}
	return b.String(), r, nil
}

// plainHosts reports whether netloc, the hosts of a URL, holds no '@'
// and numeric ports only. Anything else may be a password pgx did not
// take for one: the rest of a password with an '@' not percent-encoded
// (postgres://u:p@ss@host, where pgx reads the password "p" and the host
// "ss@host"), or one after a forgotten '@' (postgres://u:secret/db, the
// port "secret").
func plainHosts(netloc string) bool {
	for {
		i := strings.IndexByte(netloc, '[')
		if i < 0 {
			break
		}
		j := strings.IndexByte(netloc[i:], ']')
		if j < 0 {
			return false
		}
		netloc = netloc[:i] + netloc[i+j+1:]
	}
	if strings.Contains(netloc, "@") {
		return false
	}
	for elem := range strings.SplitSeq(netloc, ",") {
		_, port, _ := strings.Cut(elem, ":")
		if strings.Trim(port, "0123456789") != "" {
			return false
		}
	}
	return true
}

// urlQueryStart returns the index of the '?' that starts the query of p,
// a URL after its scheme and userinfo, or -1: the first '?' after the
// comma-separated hosts, where a bracketed IPv6 address may hold '?'.
func urlQueryStart(p string) int {
	i := 0
	for {
		if i < len(p) && p[i] == '[' {
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return strings.IndexByte(p, '?')
			}
			i += end + 1
		}
		for i < len(p) && p[i] != '/' && p[i] != '?' && p[i] != ',' {
			i++
		}
		if i < len(p) && p[i] == ',' {
			i++
			continue
		}
		break
	}
	if i == len(p) {
		return -1
	}
	if p[i] == '?' {
		return i
	}
	if j := strings.IndexByte(p[i:], '?'); j >= 0 {
		return i + j
	}
	return -1
}

// percentDecode decodes a URL query key as pgx does: leading and trailing
// spaces dropped, %XX decoded. An invalid escape is kept as it is (pgx
// rejects the string then).
func percentDecode(s string) string {
	s = strings.Trim(s, " ")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const kvSpace = " \t\n\r\v\f"

// redactKeywordValue redacts a keyword/value string (host=db
// password=secret dbname=app) as pgx parses it: keyword, optional spaces,
// '=', optional spaces, then a value that is either quoted ('...', with
// backslash escapes) or runs to the next space (a backslash escapes any
// character, spaces too). The pairs it keeps are joined by one space.
func redactKeywordValue(s string) (string, redacted, error) {
	var r redacted
	if strings.IndexByte(s, 0) >= 0 {
		return "", r, errAmbiguous
	}
	var kept []string
	s = strings.TrimLeft(s, kvSpace)
	for len(s) > 0 {
		start := s
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return "", r, errAmbiguous
		}
		key := strings.Trim(s[:eq], kvSpace)
		if key == "" || strings.ContainsAny(key, kvSpace) {
			return "", r, errAmbiguous
		}
		s = strings.TrimLeft(s[eq+1:], kvSpace)
		var value string
		switch {
		case len(s) == 0:
		case s[0] != '\'':
			end := 0
			for ; end < len(s) && !strings.ContainsRune(kvSpace, rune(s[end])); end++ {
				if s[end] == '\\' {
					end++
					if end == len(s) {
						break
					}
				}
			}
			value, s = s[:end], s[end:]
		default:
			end := 1
			for ; end < len(s) && s[end] != '\''; end++ {
				if s[end] == '\\' {
					end++
				}
			}
			if end >= len(s) {
				return "", r, errAmbiguous // unterminated
			}
			value, s = s[:end+1], s[end+1:]
		}
		pair := start[:len(start)-len(s)]
		s = strings.TrimLeft(s, kvSpace)
		switch key {
		case "password":
			r.password = r.password || (value != "" && value != "''")
		case "sslpassword":
			r.sslPassword = r.sslPassword || (value != "" && value != "''")
		default:
			kept = append(kept, pair)
		}
	}
	return strings.Join(kept, " "), r, nil
}

// shellQuote quotes s for a POSIX shell: in single quotes, each single
// quote in it closing the quotes, escaped, and opening them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellArg is s as one shell word: as it is when it holds only
// characters no shell treats specially, else quoted.
func shellArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return shellQuote(s)
}

// shellDoubleQuote quotes s for a POSIX shell in double quotes, with the
// four characters special in them ($ ` " \) escaped.
func shellDoubleQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range []byte(s) {
		if strings.IndexByte("$`\"\\", c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}
