// Package assert holds the assertions of the root module's tests. They
// report a failure with t.Errorf and return whether the check held, so a
// test goes on; package require stops the test instead.
//
// The root module keeps its own, small set rather than requiring an
// assertion library: a module's test dependencies are listed in its go.mod
// and reach every user's module graph, and the root module promises to
// require only github.com/benbjohnson/clock and go.uber.org/goleak.
//
// The last arguments of every assertion are an optional message: a format
// string and its arguments, or a single value.
package assert

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// T is the part of testing.TB the assertions use.
type T interface {
	Helper()
	Errorf(format string, args ...any)
}

// Fail reports a failure, saying what went wrong, and returns false.
func Fail(t T, what string, msg ...any) bool {
	t.Helper()
	return fail(t, what, msg)
}

// fail reports a failed check: what failed, then the caller's message.
func fail(t T, what string, msg []any) bool {
	t.Helper()
	if m := message(msg); m != "" {
		what += "\n" + m
	}
	t.Errorf("%s", what)
	return false
}

func message(msg []any) string {
	switch {
	case len(msg) == 0:
		return ""
	case len(msg) == 1:
		return fmt.Sprint(msg[0])
	}
	if format, ok := msg[0].(string); ok {
		return fmt.Sprintf(format, msg[1:]...)
	}
	return fmt.Sprint(msg...)
}

// equal is reflect.DeepEqual, except that byte slices compare by content
// (nil and empty are equal).
func equal(expected, actual any) bool {
	eb, ok1 := expected.([]byte)
	ab, ok2 := actual.([]byte)
	if ok1 && ok2 {
		return bytes.Equal(eb, ab)
	}
	return reflect.DeepEqual(expected, actual)
}

// Equal checks that actual is deeply equal to expected, of the same type.
func Equal(t T, expected, actual any, msg ...any) bool {
	t.Helper()
	if equal(expected, actual) {
		return true
	}
	return fail(t, fmt.Sprintf("not equal:\nexpected: %#v\nactual  : %#v", expected, actual), msg)
}

// NotEqual checks that actual is not deeply equal to expected.
func NotEqual(t T, expected, actual any, msg ...any) bool {
	t.Helper()
	if !equal(expected, actual) {
		return true
	}
	return fail(t, fmt.Sprintf("both are %#v", actual), msg)
}

// Same checks that two pointers point to the same value.
func Same(t T, expected, actual any, msg ...any) bool {
	t.Helper()
	e, a := reflect.ValueOf(expected), reflect.ValueOf(actual)
	if e.Kind() == reflect.Pointer && a.Kind() == reflect.Pointer && e.Type() == a.Type() && e.Pointer() == a.Pointer() {
		return true
	}
	return fail(t, fmt.Sprintf("not the same pointer:\nexpected: %p %#v\nactual  : %p %#v", expected, expected, actual, actual), msg)
}

// True checks that v is true.
func True(t T, v bool, msg ...any) bool {
	t.Helper()
	if v {
		return true
	}
	return fail(t, "should be true", msg)
}

// False checks that v is false.
func False(t T, v bool, msg ...any) bool {
	t.Helper()
	if !v {
		return true
	}
	return fail(t, "should be false", msg)
}

// isNil reports whether v is nil or a nil pointer, map, slice, channel,
// function or interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// Nil checks that v is nil (see isNil).
func Nil(t T, v any, msg ...any) bool {
	t.Helper()
	if isNil(v) {
		return true
	}
	return fail(t, fmt.Sprintf("should be nil: %#v", v), msg)
}

// Zero checks that v is the zero value of its type.
func Zero(t T, v any, msg ...any) bool {
	t.Helper()
	if v == nil || reflect.ValueOf(v).IsZero() {
		return true
	}
	return fail(t, fmt.Sprintf("should be zero: %#v", v), msg)
}

// NotZero checks that v is not the zero value of its type.
func NotZero(t T, v any, msg ...any) bool {
	t.Helper()
	if v != nil && !reflect.ValueOf(v).IsZero() {
		return true
	}
	return fail(t, fmt.Sprintf("should not be zero: %#v", v), msg)
}

// isEmpty reports whether v is nil, zero, of length 0, or a pointer to
// an empty value.
func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Array, reflect.Chan, reflect.Map, reflect.Slice, reflect.String:
		return rv.Len() == 0
	case reflect.Pointer:
		return rv.IsNil() || isEmpty(rv.Elem().Interface())
	}
	return rv.IsZero()
}

// Empty checks that v is empty (see isEmpty).
func Empty(t T, v any, msg ...any) bool {
	t.Helper()
	if isEmpty(v) {
		return true
	}
	return fail(t, fmt.Sprintf("should be empty: %#v", v), msg)
}

// Len checks that v, an array, channel, map, slice or string, has n
// elements.
func Len(t T, v any, n int, msg ...any) bool {
	t.Helper()
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Array, reflect.Chan, reflect.Map, reflect.Slice, reflect.String:
		if rv.Len() == n {
			return true
		}
		return fail(t, fmt.Sprintf("should have %d elements, has %d: %#v", n, rv.Len(), v), msg)
	}
	return fail(t, fmt.Sprintf("has no length: %#v", v), msg)
}

// contains reports whether s holds elem: as a substring of a string, an
// element of an array or slice, or a key of a map. ok is false when s is
// none of these.
func contains(s, elem any) (found, ok bool) {
	rv := reflect.ValueOf(s)
	switch rv.Kind() {
	case reflect.String:
		sub, isString := elem.(string)
		return isString && strings.Contains(rv.String(), sub), true
	case reflect.Array, reflect.Slice:
		for i := range rv.Len() {
			if equal(rv.Index(i).Interface(), elem) {
				return true, true
			}
		}
		return false, true
	case reflect.Map:
		for _, k := range rv.MapKeys() {
			if equal(k.Interface(), elem) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// Contains checks that s holds elem (see contains).
func Contains(t T, s, elem any, msg ...any) bool {
	t.Helper()
	return holds(t, s, elem, true, msg)
}

// NotContains checks that s does not hold elem (see contains).
func NotContains(t T, s, elem any, msg ...any) bool {
	t.Helper()
	return holds(t, s, elem, false, msg)
}

// holds checks that contains(s, elem) is want.
func holds(t T, s, elem any, want bool, msg []any) bool {
	t.Helper()
	found, ok := contains(s, elem)
	switch {
	case !ok:
		return fail(t, fmt.Sprintf("cannot look for %#v in %#v", elem, s), msg)
	case found != want && want:
		return fail(t, fmt.Sprintf("%#v does not contain %#v", s, elem), msg)
	case found != want:
		return fail(t, fmt.Sprintf("%#v contains %#v", s, elem), msg)
	}
	return true
}

// NoError checks that err is nil.
func NoError(t T, err error, msg ...any) bool {
	t.Helper()
	if err == nil {
		return true
	}
	return fail(t, fmt.Sprintf("unexpected error: %v", err), msg)
}

// Error checks that err is not nil.
func Error(t T, err error, msg ...any) bool {
	t.Helper()
	if err != nil {
		return true
	}
	return fail(t, "an error was expected", msg)
}

// EqualError checks that err is not nil and its message is want.
func EqualError(t T, err error, want string, msg ...any) bool {
	t.Helper()
	if err == nil {
		return fail(t, fmt.Sprintf("an error %q was expected", want), msg)
	}
	if err.Error() == want {
		return true
	}
	return fail(t, fmt.Sprintf("error message not equal:\nexpected: %q\nactual  : %q", want, err.Error()), msg)
}

// ErrorContains checks that err is not nil and its message contains sub.
func ErrorContains(t T, err error, sub string, msg ...any) bool {
	t.Helper()
	if err == nil {
		return fail(t, fmt.Sprintf("an error containing %q was expected", sub), msg)
	}
	if strings.Contains(err.Error(), sub) {
		return true
	}
	return fail(t, fmt.Sprintf("error %q does not contain %q", err.Error(), sub), msg)
}

// ErrorIs checks that errors.Is(err, target).
func ErrorIs(t T, err, target error, msg ...any) bool {
	t.Helper()
	if errors.Is(err, target) {
		return true
	}
	return fail(t, fmt.Sprintf("error does not match:\nerror : %v\ntarget: %v", err, target), msg)
}

// NotErrorIs checks that !errors.Is(err, target).
func NotErrorIs(t T, err, target error, msg ...any) bool {
	t.Helper()
	if !errors.Is(err, target) {
		return true
	}
	return fail(t, fmt.Sprintf("error should not match:\nerror : %v\ntarget: %v", err, target), msg)
}

// ErrorAs checks that errors.As(err, target), which sets *target.
func ErrorAs(t T, err error, target any, msg ...any) bool {
	t.Helper()
	if errors.As(err, target) {
		return true
	}
	return fail(t, fmt.Sprintf("no %v in the chain of error %v", reflect.TypeOf(target).Elem(), err), msg)
}

// compare returns -1, 0 or 1 as a is less than, equal to or greater than
// b, for two values of the same integer, float or string type.
func compare(a, b any) (int, error) {
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	if !av.IsValid() || !bv.IsValid() || av.Type() != bv.Type() {
		return 0, fmt.Errorf("cannot compare %#v and %#v: not of the same type", a, b)
	}
	switch av.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return cmp3(av.Int() < bv.Int(), av.Int() > bv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return cmp3(av.Uint() < bv.Uint(), av.Uint() > bv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		if math.IsNaN(av.Float()) || math.IsNaN(bv.Float()) {
			return 0, fmt.Errorf("cannot compare %v and %v", a, b)
		}
		return cmp3(av.Float() < bv.Float(), av.Float() > bv.Float()), nil
	case reflect.String:
		return strings.Compare(av.String(), bv.String()), nil
	}
	return 0, fmt.Errorf("cannot compare values of type %v", av.Type())
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

// ordered checks that compare(a, b) is one of want.
func ordered(t T, a, b any, rel string, msg []any, want ...int) bool {
	t.Helper()
	c, err := compare(a, b)
	if err != nil {
		return fail(t, err.Error(), msg)
	}
	for _, w := range want {
		if c == w {
			return true
		}
	}
	return fail(t, fmt.Sprintf("%v should be %s %v", a, rel, b), msg)
}

// Less checks that a < b.
func Less(t T, a, b any, msg ...any) bool {
	t.Helper()
	return ordered(t, a, b, "less than", msg, -1)
}

// LessOrEqual checks that a <= b.
func LessOrEqual(t T, a, b any, msg ...any) bool {
	t.Helper()
	return ordered(t, a, b, "less than or equal to", msg, -1, 0)
}

// Greater checks that a > b.
func Greater(t T, a, b any, msg ...any) bool {
	t.Helper()
	return ordered(t, a, b, "greater than", msg, 1)
}

// GreaterOrEqual checks that a >= b.
func GreaterOrEqual(t T, a, b any, msg ...any) bool {
	t.Helper()
	return ordered(t, a, b, "greater than or equal to", msg, 1, 0)
}

// Positive checks that a number is greater than zero.
func Positive(t T, v any, msg ...any) bool {
	t.Helper()
	if v == nil {
		return fail(t, "nil is not a number", msg)
	}
	return ordered(t, v, reflect.Zero(reflect.TypeOf(v)).Interface(), "greater than", msg, 1)
}

// InDelta checks that |expected - actual| <= delta.
func InDelta(t T, expected, actual, delta float64, msg ...any) bool {
	t.Helper()
	if d := math.Abs(expected - actual); d <= delta {
		return true
	}
	return fail(t, fmt.Sprintf("%v and %v differ by more than %v", expected, actual, delta), msg)
}

// InEpsilon checks that actual is within a relative error epsilon of
// expected, which must not be zero.
func InEpsilon(t T, expected, actual, epsilon float64, msg ...any) bool {
	t.Helper()
	if expected == 0 || math.IsNaN(expected) || math.IsNaN(actual) {
		return fail(t, fmt.Sprintf("no relative error between %v and %v", expected, actual), msg)
	}
	if rel := math.Abs(expected-actual) / math.Abs(expected); rel <= epsilon {
		return true
	}
	return fail(t, fmt.Sprintf("%v and %v differ by more than %v of %v", expected, actual, epsilon, expected), msg)
}
