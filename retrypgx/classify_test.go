package retrypgx_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrypgx"
)

// The classification table of the package doc, row by row.
func TestClassify(t *testing.T) {
	x, err := retrypgx.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	opError := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	type row struct {
		name          string
		err           error
		before, atCmt retrypgx.Verdict
	}
	P, R, U := retrypgx.Permanent, retrypgx.Retryable, retrypgx.Unknown
	for _, c := range []row{
		{"40001 serialization_failure", pgErr("40001", "ERROR"), R, R},
		{"40P01 deadlock_detected", pgErr("40P01", "ERROR"), R, R},
		{"40003 statement_completion_unknown", pgErr("40003", "ERROR"), U, U},
		{"40002 integrity constraint", pgErr("40002", "ERROR"), P, P},
		{"08006 connection_failure", pgErr("08006", "FATAL"), R, U},
		{"08P01 protocol_violation", pgErr("08P01", "FATAL"), R, U},
		{"57P01 admin_shutdown", pgErr("57P01", "FATAL"), R, U},
		{"57P02 crash_shutdown", pgErr("57P02", "FATAL"), R, U},
		{"57P03 cannot_connect_now", pgErr("57P03", "FATAL"), R, U},
		{"53300 too_many_connections", pgErr("53300", "FATAL"), R, U},
		{"a FATAL of another class at COMMIT", pgErr("XX000", "FATAL"), P, U},
		{"23505 unique_violation", pgErr("23505", "ERROR"), P, P},
		{"57014 query_canceled", pgErr("57014", "ERROR"), P, P},
		{"42P01 undefined_table", pgErr("42P01", "ERROR"), P, P},
		{"wrapped 40001", fmt.Errorf("transfer: %w", pgErr("40001", "ERROR")), R, R},
		{"connection reset", opError, R, U},
		{"unexpected EOF", fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), R, U},
		{"closed socket", net.ErrClosed, R, U},
		{"driver.ErrBadConn", driver.ErrBadConn, R, R},
		{"sql.ErrTxDone", sql.ErrTxDone, P, R},
		{"context canceled", context.Canceled, R, U},
		{"deadline exceeded", context.DeadlineExceeded, R, U},
		{"pgx.ErrTxCommitRollback", pgx.ErrTxCommitRollback, P, P},
		{"an error of fn's own", errors.New("insufficient funds"), P, U},
		{"pgx.ErrNoRows", pgx.ErrNoRows, P, U},
		{"nil", nil, P, P},
	} {
		if got := x.Classify(c.err, retrypgx.BeforeCommit); got != c.before {
			t.Errorf("%s before COMMIT: %v, want %v", c.name, got, c.before)
		}
		if got := x.Classify(c.err, retrypgx.AtCommit); got != c.atCmt {
			t.Errorf("%s at COMMIT: %v, want %v", c.name, got, c.atCmt)
		}
	}
}

// A nil Runner classifies with the defaults rather than panic.
func TestClassifyNilRunner(t *testing.T) {
	var x *retrypgx.Runner
	if got := x.Classify(pgErr("40P01", "ERROR"), retrypgx.BeforeCommit); got != retrypgx.Retryable {
		t.Fatalf("40P01: %v, want retryable", got)
	}
	if got := x.Classify(io.EOF, retrypgx.AtCommit); got != retrypgx.Unknown {
		t.Fatalf("EOF at COMMIT: %v, want unknown", got)
	}
}

// NoDeadlockRetry makes 40P01 permanent; RetryCodes add codes, but never
// make a lost connection at COMMIT retryable.
func TestClassifyOptions(t *testing.T) {
	x, err := retrypgx.New(nil, &retrypgx.Options{NoDeadlockRetry: true, RetryCodes: []string{"23505", "08006"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code  string
		stage retrypgx.Stage
		want  retrypgx.Verdict
	}{
		{"40P01", retrypgx.BeforeCommit, retrypgx.Permanent},
		{"40P01", retrypgx.AtCommit, retrypgx.Permanent},
		{"40001", retrypgx.BeforeCommit, retrypgx.Retryable},
		{"23505", retrypgx.BeforeCommit, retrypgx.Retryable},
		{"23505", retrypgx.AtCommit, retrypgx.Retryable},
		{"23P01", retrypgx.BeforeCommit, retrypgx.Permanent},
		{"08006", retrypgx.AtCommit, retrypgx.Unknown},
	} {
		if got := x.Classify(pgErr(c.code, "ERROR"), c.stage); got != c.want {
			t.Errorf("%s at stage %d: %v, want %v", c.code, c.stage, got, c.want)
		}
	}
}

// A SQLSTATE that cannot be one is refused at construction, with the
// reason: lower case would never match.
func TestNewRefusesBadRetryCodes(t *testing.T) {
	for _, code := range []string{"40p01", "2350", "235055", "", "23 05"} {
		_, err := retrypgx.New(nil, &retrypgx.Options{RetryCodes: []string{code}})
		if !errors.Is(err, retry.ErrInvalidOption) {
			t.Errorf("RetryCodes %q: %v, want an error wrapping retry.ErrInvalidOption", code, err)
		} else if want := fmt.Sprintf("%q", code); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "SQLSTATE") {
			t.Errorf("RetryCodes %q: the error %q does not name the code and the rule", code, err)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// Bad input names what is wrong and runs nothing.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	x := runner(t, nil)
	fn := func(context.Context, pgx.Tx) error { t.Error("fn ran"); return nil }
	var nilRunner *retrypgx.Runner
	var nilDB *sql.DB
	for name, err := range map[string]error{
		"nil runner":     nilRunner.Tx(ctx, nil, pgx.TxOptions{}, fn),
		"nil db":         x.Tx(ctx, nil, pgx.TxOptions{}, fn),
		"nil fn":         x.Tx(ctx, nil, pgx.TxOptions{}, nil),
		"nil sql db":     x.SQLTx(ctx, nilDB, nil, func(context.Context, *sql.Tx) error { return nil }),
		"nil sql fn":     x.SQLTx(ctx, &sql.DB{}, nil, nil),
		"nil sql runner": nilRunner.SQLTx(ctx, nilDB, nil, nil),
	} {
		if !errors.Is(err, retry.ErrInvalidOption) {
			t.Errorf("%s: %v, want an error wrapping retry.ErrInvalidOption", name, err)
		}
	}
}
