// Package require holds the same checks as package assert, but a failed
// one stops the test with t.FailNow. Like FailNow itself, use them only
// on the test's own goroutine.
package require

import "github.com/steadfast-go/retry/internal/assert"

// T is the part of testing.TB the checks use.
type T interface {
	assert.T
	FailNow()
}

// stop ends the test when a check failed.
func stop(t T, ok bool) {
	t.Helper()
	if !ok {
		t.FailNow()
	}
}

// Equal is [assert.Equal], then FailNow on failure.
func Equal(t T, expected, actual any, msg ...any) {
	t.Helper()
	stop(t, assert.Equal(t, expected, actual, msg...))
}

// Len is [assert.Len], then FailNow on failure.
func Len(t T, v any, n int, msg ...any) {
	t.Helper()
	stop(t, assert.Len(t, v, n, msg...))
}

// True is [assert.True], then FailNow on failure.
func True(t T, v bool, msg ...any) {
	t.Helper()
	stop(t, assert.True(t, v, msg...))
}

// NoError is [assert.NoError], then FailNow on failure.
func NoError(t T, err error, msg ...any) {
	t.Helper()
	stop(t, assert.NoError(t, err, msg...))
}

// Error is [assert.Error], then FailNow on failure.
func Error(t T, err error, msg ...any) {
	t.Helper()
	stop(t, assert.Error(t, err, msg...))
}

// ErrorIs is [assert.ErrorIs], then FailNow on failure.
func ErrorIs(t T, err, target error, msg ...any) {
	t.Helper()
	stop(t, assert.ErrorIs(t, err, target, msg...))
}

// NotErrorIs is [assert.NotErrorIs], then FailNow on failure.
func NotErrorIs(t T, err, target error, msg ...any) {
	t.Helper()
	stop(t, assert.NotErrorIs(t, err, target, msg...))
}

// ErrorAs is [assert.ErrorAs], then FailNow on failure.
func ErrorAs(t T, err error, target any, msg ...any) {
	t.Helper()
	stop(t, assert.ErrorAs(t, err, target, msg...))
}

// LessOrEqual is [assert.LessOrEqual], then FailNow on failure.
func LessOrEqual(t T, a, b any, msg ...any) {
	t.Helper()
	stop(t, assert.LessOrEqual(t, a, b, msg...))
}

// GreaterOrEqual is [assert.GreaterOrEqual], then FailNow on failure.
func GreaterOrEqual(t T, a, b any, msg ...any) {
	t.Helper()
	stop(t, assert.GreaterOrEqual(t, a, b, msg...))
}

// Positive is [assert.Positive], then FailNow on failure.
func Positive(t T, v any, msg ...any) {
	t.Helper()
	stop(t, assert.Positive(t, v, msg...))
}

// FailNow fails the test at once, saying what went wrong.
func FailNow(t T, what string, msg ...any) {
	t.Helper()
	stop(t, assert.Fail(t, what, msg...))
}
