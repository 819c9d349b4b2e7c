package assert_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/steadfast-go/retry/internal/assert"
	"github.com/steadfast-go/retry/internal/require"
)

// fakeT records what the checks report instead of failing the test.
type fakeT struct {
	errors []string
	failed bool // FailNow was called
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeT) FailNow() { f.failed = true }

type box struct{ n int }

// TestChecks runs each check once where it must hold and once where it
// must fail, and checks both the result and the report.
func TestChecks(t *testing.T) {
	var pathErr *fs.PathError
	wrapped := fmt.Errorf("open: %w", &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist})
	p, q := &box{1}, &box{1}
	cases := []struct {
		name       string
		pass, fail func(assert.T) bool
	}{
		{"Equal", func(t assert.T) bool { return assert.Equal(t, []int{1, 2}, []int{1, 2}) },
			func(t assert.T) bool { return assert.Equal(t, 1, int64(1)) }},
		{"Equal/bytes", func(t assert.T) bool { return assert.Equal(t, []byte(nil), []byte{}) },
			func(t assert.T) bool { return assert.Equal(t, []byte("a"), []byte("b")) }},
		{"NotEqual", func(t assert.T) bool { return assert.NotEqual(t, 1, 2) },
			func(t assert.T) bool { return assert.NotEqual(t, "a", "a") }},
		{"Same", func(t assert.T) bool { return assert.Same(t, p, p) },
			func(t assert.T) bool { return assert.Same(t, p, q) }},
		{"True", func(t assert.T) bool { return assert.True(t, true) },
			func(t assert.T) bool { return assert.True(t, false) }},
		{"False", func(t assert.T) bool { return assert.False(t, false) },
			func(t assert.T) bool { return assert.False(t, true) }},
		{"Nil", func(t assert.T) bool { return assert.Nil(t, (*box)(nil)) },
			func(t assert.T) bool { return assert.Nil(t, p) }},
		{"Zero", func(t assert.T) bool { return assert.Zero(t, 0.0) },
			func(t assert.T) bool { return assert.Zero(t, time.Second) }},
		{"NotZero", func(t assert.T) bool { return assert.NotZero(t, uint64(3)) },
			func(t assert.T) bool { return assert.NotZero(t, "") }},
		{"Empty", func(t assert.T) bool { return assert.Empty(t, map[string]int{}) },
			func(t assert.T) bool { return assert.Empty(t, []int{0}) }},
		{"Len", func(t assert.T) bool { return assert.Len(t, "abc", 3) },
			func(t assert.T) bool { return assert.Len(t, []int{1}, 2) }},
		{"Len/noLength", func(t assert.T) bool { return assert.Len(t, map[int]int{1: 1}, 1) },
			func(t assert.T) bool { return assert.Len(t, 5, 1) }},
		{"Contains/string", func(t assert.T) bool { return assert.Contains(t, "retry: boom", "boom") },
			func(t assert.T) bool { return assert.Contains(t, "retry: boom", "bang") }},
		{"Contains/slice", func(t assert.T) bool { return assert.Contains(t, []time.Duration{1, 2}, time.Duration(2)) },
			func(t assert.T) bool { return assert.Contains(t, []time.Duration{1, 2}, 2) }},
		{"Contains/map", func(t assert.T) bool { return assert.Contains(t, map[string]int{"k": 1}, "k") },
			func(t assert.T) bool { return assert.Contains(t, 42, "4") }},
		{"NotContains", func(t assert.T) bool { return assert.NotContains(t, "abc", "d") },
			func(t assert.T) bool { return assert.NotContains(t, "abc", "b") }},
		{"NoError", func(t assert.T) bool { return assert.NoError(t, nil) },
			func(t assert.T) bool { return assert.NoError(t, os.ErrClosed) }},
		{"Error", func(t assert.T) bool { return assert.Error(t, os.ErrClosed) },
			func(t assert.T) bool { return assert.Error(t, nil) }},
		{"EqualError", func(t assert.T) bool { return assert.EqualError(t, errors.New("x"), "x") },
			func(t assert.T) bool { return assert.EqualError(t, nil, "x") }},
		{"ErrorContains", func(t assert.T) bool { return assert.ErrorContains(t, wrapped, "open x") },
			func(t assert.T) bool { return assert.ErrorContains(t, wrapped, "closed") }},
		{"ErrorIs", func(t assert.T) bool { return assert.ErrorIs(t, wrapped, fs.ErrNotExist) },
			func(t assert.T) bool { return assert.ErrorIs(t, wrapped, fs.ErrExist) }},
		{"NotErrorIs", func(t assert.T) bool { return assert.NotErrorIs(t, wrapped, fs.ErrExist) },
			func(t assert.T) bool { return assert.NotErrorIs(t, wrapped, fs.ErrNotExist) }},
		{"ErrorAs", func(t assert.T) bool { return assert.ErrorAs(t, wrapped, &pathErr) && pathErr.Path == "x" },
			func(t assert.T) bool { return assert.ErrorAs(t, os.ErrClosed, &pathErr) }},
		{"Less", func(t assert.T) bool { return assert.Less(t, 1.5, 2.0) },
			func(t assert.T) bool { return assert.Less(t, 2, 2) }},
		{"LessOrEqual", func(t assert.T) bool { return assert.LessOrEqual(t, time.Second, time.Second) },
			func(t assert.T) bool { return assert.LessOrEqual(t, uint8(3), uint8(2)) }},
		{"Greater", func(t assert.T) bool { return assert.Greater(t, "b", "a") },
			func(t assert.T) bool { return assert.Greater(t, 1, 2) }},
		{"GreaterOrEqual", func(t assert.T) bool { return assert.GreaterOrEqual(t, int64(0), int64(0)) },
			func(t assert.T) bool { return assert.GreaterOrEqual(t, 1, int64(0)) }},
		{"Positive", func(t assert.T) bool { return assert.Positive(t, uint64(1)) },
			func(t assert.T) bool { return assert.Positive(t, 0) }},
		{"InDelta", func(t assert.T) bool { return assert.InDelta(t, 10, 12, 2) },
			func(t assert.T) bool { return assert.InDelta(t, 10, 12.5, 2) }},
		{"InEpsilon", func(t assert.T) bool { return assert.InEpsilon(t, 100, 100.9, 0.01) },
			func(t assert.T) bool { return assert.InEpsilon(t, 100, 102, 0.01) }},
		{"Fail", func(assert.T) bool { return true },
			func(t assert.T) bool { return assert.Fail(t, "gave up") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ok fakeT
			if !tc.pass(&ok) || len(ok.errors) != 0 {
				t.Errorf("should hold, reported %q", ok.errors)
			}
			var bad fakeT
			if tc.fail(&bad) || len(bad.errors) != 1 {
				t.Errorf("should fail once, reported %q", bad.errors)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	var f fakeT
	assert.True(t, !assert.Equal(&f, 1, 2, "wait %d of %s", 3, "x"))
	assert.True(t, !assert.Equal(&f, 1, 2, 42))
	if len(f.errors) != 2 || !strings.HasSuffix(f.errors[0], "\nwait 3 of x") || !strings.HasSuffix(f.errors[1], "\n42") {
		t.Fatalf("messages: %q", f.errors)
	}
}

func TestRequireStops(t *testing.T) {
	var f fakeT
	require.NoError(&f, nil)
	if f.failed || len(f.errors) != 0 {
		t.Fatalf("a check that held stopped the test: %q", f.errors)
	}
	require.ErrorIs(&f, os.ErrClosed, fs.ErrNotExist)
	if !f.failed || len(f.errors) != 1 {
		t.Fatalf("a failed check did not stop the test: failed=%v %q", f.failed, f.errors)
	}
}
