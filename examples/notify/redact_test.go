package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The secret every connection string below holds, in part or whole.
const secret = "s3cretpw"

// TestRedactConn: every place pgx reads a password (or sslpassword) from
// is emptied, whatever the form; what is left means to pgx what the
// original did, less the secrets; a string whose parts are uncertain is
// replaced whole.
func TestRedactConn(t *testing.T) {
	// pgx reads the password from these when the string has none: keep
	// the comparison below to the strings.
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGSSLPASSWORD", "")
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	pw := redacted{password: true}
	for _, tc := range []struct {
		in, want string
		r        redacted
	}{
		// URLs: the userinfo.
		{"postgres://app:s3cretpw@db:5432/app", "postgres://app@db:5432/app", pw},
		{"postgresql://app:s3cretpw@db/app?sslmode=disable", "postgresql://app@db/app?sslmode=disable", pw},
		{"postgres://app:s3c%40retpw@db/app", "postgres://app@db/app", pw},
		{"postgres://:s3cretpw@db/app", "postgres://@db/app", pw},
		{"postgres://app:s3cretpw@h1:5432,h2:5433/app?target_session_attrs=read-write", "postgres://app@h1:5432,h2:5433/app?target_session_attrs=read-write", pw},
		{"postgres://app:s3cretpw@[::1]:5432/app", "postgres://app@[::1]:5432/app", pw},
		{"postgres://app:s3cretpw@db/app?application_name=me@work", "postgres://app@db/app?application_name=me@work", pw},
		// URLs: the query.
		{"postgres://app@db/app?password=s3cretpw", "postgres://app@db/app", pw},
		{"postgres://app@db/app?sslmode=disable&password=s3cretpw&connect_timeout=5", "postgres://app@db/app?sslmode=disable&connect_timeout=5", pw},
		{"postgres://db/app?pass%77ord=s3cretpw", "postgres://db/app", pw},
		{"postgres://db?password=s3cretpw", "postgres://db", pw},
		{"postgres://app:s3cretpw@db/app?password=s3cretpw&sslpassword=s3cretpw", "postgres://app@db/app", redacted{password: true, sslPassword: true}},
		{"postgres://app@db/app?sslpassword=s3cretpw&sslmode=disable", "postgres://app@db/app?sslmode=disable", redacted{sslPassword: true}},
		// URLs without a password are kept as they are.
		{"postgres://app@db:5432/app?sslmode=disable", "postgres://app@db:5432/app?sslmode=disable", redacted{}},
		{"postgres:///app?host=/var/run/postgresql", "postgres:///app?host=/var/run/postgresql", redacted{}},
		// Keyword/value strings.
		{"host=db user=app password=s3cretpw dbname=app", "host=db user=app dbname=app", pw},
		{"password=s3cretpw host=db", "host=db", pw},
		{"host=db password = s3cretpw\tdbname=app", "host=db dbname=app", pw},
		{"host=db password='s3cret pw' dbname=app", "host=db dbname=app", pw},
		{`host=db password='s3cret\'pw' dbname=app`, "host=db dbname=app", pw},
		{`host=db password=s3cret\ pw dbname=app`, "host=db dbname=app", pw},
		{"host=db password='s3cretpw'dbname=app", "host=db dbname=app", pw},
		{"host=db application_name='my app' password=s3cretpw sslpassword='s3cretpw'", "host=db application_name='my app'", redacted{password: true, sslPassword: true}},
		{"host=db  user=app   dbname=app ", "host=db user=app dbname=app", redacted{}},
		// Uncertain: replaced whole.
		{"postgres://app:s3c@retpw@db/app", redactedPlaceholder, pw},             // an '@' not encoded
		{"postgres://app:s3cretpw/app", redactedPlaceholder, pw},                 // the '@' forgotten: the port "s3cretpw"
		{"host=db password='s3cretpw", redactedPlaceholder, pw},                  // unterminated
		{"host=db s3cretpw", redactedPlaceholder, pw},                            // no '='
		{"password=s3cretpw", redactedPlaceholder, pw},                           // nothing left
		{"postgres://app@db/app?password=s3cret\x00pw", redactedPlaceholder, pw}, // pgx refuses NUL
	} {
		got, r := redactConn(tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
		assert.Equal(t, tc.r, r, "%q", tc.in)
		assert.NotContains(t, got, "s3c", "%q", tc.in)
		if got == redactedPlaceholder {
			continue
		}
		// To pgx, the redacted string says what the original did, but
		// for the secrets.
		want, err := pgconn.ParseConfig(tc.in)
		require.NoError(t, err, "%q", tc.in)
		cfg, err := pgconn.ParseConfig(got)
		require.NoError(t, err, "%q -> %q", tc.in, got)
		assert.Empty(t, cfg.Password, "%q -> %q", tc.in, got)
		if tc.r.password {
			assert.Contains(t, want.Password, "s3c", "%q: the test's secret is not where pgx reads it", tc.in)
		}
		assert.Equal(t, want.Host, cfg.Host, "%q", tc.in)
		assert.Equal(t, want.Port, cfg.Port, "%q", tc.in)
		assert.Equal(t, want.Database, cfg.Database, "%q", tc.in)
		assert.Equal(t, want.User, cfg.User, "%q", tc.in)
		assert.Equal(t, want.RuntimeParams, cfg.RuntimeParams, "%q", tc.in)
		assert.Equal(t, want.ConnectTimeout, cfg.ConnectTimeout, "%q", tc.in)
		assert.Equal(t, want.TLSConfig == nil, cfg.TLSConfig == nil, "%q", tc.in)
		assert.Equal(t, len(want.Fallbacks), len(cfg.Fallbacks), "%q", tc.in)
	}
}

// TestPrintedCommandsHoldNoPassword: the deadletters commands printed
// for a -postgres run hold no password in any form, say where to give
// it, and are shell words that give deadletters and notify -resend the
// redacted connection string as one argument each.
func TestPrintedCommandsHoldNoPassword(t *testing.T) {
	started := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ in, conn string }{
		{"postgres://app:s3cretpw@db/app?sslmode=disable", "postgres://app@db/app?sslmode=disable"},
		{"postgres://app@db/app?password=s3cretpw&sslmode=disable", "postgres://app@db/app?sslmode=disable"},
		{"host=db user=app password=s3cretpw dbname=app", "host=db user=app dbname=app"},
		{`host=db password='s3cret pw' application_name='it\'s $HOME' dbname=app`, `host=db application_name='it\'s $HOME' dbname=app`},
	} {
		cfg := config{postgres: tc.in, namespace: "notify"}
		b := &backends{sinkName: "PostgreSQL, table notify_dead_letters", where: postgresWhere(tc.in, "notify_dead_letters")}
		var out bytes.Buffer
		printCommands(&out, cfg, b, started, summary{DeadLettered: 3, Exhausted: 3})
		text := out.String()
		assert.NotContains(t, text, "s3c", tc.in)
		assert.Contains(t, text, "The commands leave out the password of -postgres: set PGPASSWORD (or use ~/.pgpass) where you run them.", tc.in)

		list := commandLine(t, text, "  go run ./cmd/deadletters list ")
		assert.Equal(t, []string{"list", "-postgres", tc.conn, "-table", "notify_dead_letters"}, list[:5], tc.in)
		redrive := commandLine(t, text, "  go run ./cmd/deadletters redrive ")
		require.Equal(t, "-exec", redrive[len(redrive)-2], tc.in)
		resend := shellWords(t, redrive[len(redrive)-1])
		assert.Equal(t, []string{"go", "run", "./examples/notify", "-resend", "-postgres", tc.conn, "-namespace", "notify"}, resend, tc.in)
	}
}

// TestPrintedCommandsWithoutPostgres: no hint when there is no password,
// and a -dead-letters path the shell would split is quoted.
func TestPrintedCommandsWithoutPostgres(t *testing.T) {
	started := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	cfg := config{deadLetters: "/tmp/my dead letters.jsonl", namespace: "notify"}
	b := &backends{sinkName: "JSON Lines file", where: "-file " + shellArg(cfg.deadLetters)}
	var out bytes.Buffer
	printCommands(&out, cfg, b, started, summary{DeadLettered: 3, Exhausted: 3})
	assert.NotContains(t, out.String(), "PGPASSWORD")
	list := commandLine(t, out.String(), "  go run ./cmd/deadletters list ")
	assert.Equal(t, []string{"list", "-file", "/tmp/my dead letters.jsonl", "-since"}, list[:4])
	assert.Equal(t, "-file /tmp/notify-deadletters.jsonl", "-file "+shellArg("/tmp/notify-deadletters.jsonl"), "a plain path as it is")
}

// commandLine returns the shell words of the line of text that starts
// with prefix, from "go run ./cmd/deadletters " on, without those three.
func commandLine(t *testing.T, text, prefix string) []string {
	t.Helper()
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			words := shellWords(t, line)
			require.Equal(t, []string{"go", "run", "./cmd/deadletters"}, words[:3])
			return words[3:]
		}
	}
	require.Failf(t, "no command", "no line starts with %q in\n%s", prefix, text)
	return nil
}

// shellWords splits line into words as /bin/sh does.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "/bin/sh", "-c", `words() { for a in "$@"; do printf '%s\0' "$a"; done; }; words `+line).Output()
	require.NoError(t, err, line)
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}
