package retrypgx

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/steadfast-go/retry"
)

// Stage says where in a transaction an error came: before COMMIT, or from
// COMMIT itself (and, with [Options.CockroachRestart], from RELEASE
// SAVEPOINT, which commits in CockroachDB).
type Stage int

const (
	// BeforeCommit is BEGIN and the statements of the transaction: a
	// failure there leaves nothing committed.
	BeforeCommit Stage = iota
	// AtCommit is COMMIT: a connection lost while it was in flight leaves
	// the outcome unknown.
	AtCommit
)

// Verdict is what [Runner.Classify] makes of an error.
type Verdict int

const (
	// Permanent errors end the call: another attempt would fail alike.
	Permanent Verdict = iota
	// Retryable errors say nothing was committed and another attempt,
	// run whole, may succeed.
	Retryable
	// Unknown errors say the transaction may or may not have committed:
	// never retried blindly (see [ErrCommitOutcomeUnknown]).
	Unknown
)

// String names the verdict: "permanent", "retryable" or "unknown".
func (v Verdict) String() string {
	switch v {
	case Retryable:
		return "retryable"
	case Unknown:
		return "unknown"
	}
	return "permanent"
}

// SQLSTATE codes the classification names (PostgreSQL's Appendix A).
const (
	codeSerializationFailure = "40001"
	codeCompletionUnknown    = "40003"
	codeDeadlockDetected     = "40P01"
	codeTooManyConnections   = "53300"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
)

// Classify says what the Runner makes of err, returned at stage: the
// table in the package doc. Its Tx and SQLTx use it on every error; it is
// exported for loops of one's own and for tests. A nil err is Permanent;
// a nil Runner classifies with the default Options.
func (x *Runner) Classify(err error, stage Stage) Verdict {
	if err == nil {
		return Permanent
	}
	code := sqlState(err)
	switch {
	case code == codeCompletionUnknown:
		// The server itself says it does not know.
		return Unknown
	case stage == AtCommit && fatalAnswer(err):
		return Unknown
	case connectionCode(code):
		if stage == AtCommit {
			return Unknown
		}
		return Retryable
	case code != "":
		// An ERROR answer: the transaction was rolled back.
		if x.retryableCode(code) {
			return Retryable
		}
		return Permanent
	case stage == AtCommit:
		return x.commitVerdict(err)
	case connectionLost(err), contextEnded(err):
		return Retryable
	}
	return Permanent
}

// commitVerdict classifies an error of COMMIT that carries no SQLSTATE.
func (x *Runner) commitVerdict(err error) Verdict {
	switch {
	case errors.Is(err, pgx.ErrTxCommitRollback):
		// The transaction had failed already; fn swallowed its error.
		return Permanent
	case pgconn.SafeToRetry(err), errors.Is(err, sql.ErrTxDone), errors.Is(err, driver.ErrBadConn):
		// COMMIT never reached the server; the transaction died with
		// its connection, or was rolled back when its context ended.
		return Retryable
	}
	// The connection failed, timed out or was closed with COMMIT in
	// flight: it may have committed.
	return Unknown
}

// retryableCode says whether an ERROR answer with code is retried.
func (x *Runner) retryableCode(code string) bool {
	switch {
	case code == codeSerializationFailure:
		return true
	case x == nil:
		return code == codeDeadlockDetected
	case code == codeDeadlockDetected:
		return !x.noDeadlockRetry
	}
	for _, c := range x.retryCodes {
		if c == code {
			return true
		}
	}
	return false
}

// sqlState returns the SQLSTATE in err's chain, from pgx's *pgconn.PgError
// or any driver's error with a SQLState method (lib/pq's), or "".
func sqlState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}

// fatalAnswer says whether the server answered with FATAL or PANIC: it
// ended the session, and what became of a COMMIT in flight is not said.
func fatalAnswer(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	sev := pe.SeverityUnlocalized
	if sev == "" {
		sev = pe.Severity
	}
	return sev == "FATAL" || sev == "PANIC"
}

// connectionCode says whether code means the session ended or never
// began: class 08, an administrator's or a crash's shutdown, a server
// starting up or recovering, or no connection slot free.
func connectionCode(code string) bool {
	switch code {
	case codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow, codeTooManyConnections:
		return true
	}
	return strings.HasPrefix(code, "08")
}

// connectionLost says whether err is a failure of the connection rather
// than an answer: a failed connect, a reset, a closed socket, a timeout.
func connectionLost(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), pgconn.SafeToRetry(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone):
		return true
	}
	return false
}

// contextEnded says whether err is a context's end; the Retrier decides on
// it (the call's context ended: stop; an attempt's timeout: retry).
func contextEnded(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// retryGaveUp says whether err holds a Retrier's error, from a call with
// retries inside fn: the outer Retrier's own rules apply to it.
func retryGaveUp(err error) bool {
	var re *retry.Error
	return errors.As(err, &re)
}
