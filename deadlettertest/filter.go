package deadlettertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// seed stores six records an hour apart, put out of order, t0 being the
// oldest, and marks r4 as redriven. It returns them in the order they
// were put, as a file holds them.
func (f *fixture) seed() []retry.DeadLetter {
	f.t.Helper()
	recs := []retry.DeadLetter{
		record("r0", "charge", retry.OutcomeExhausted, t0),
		record("r1", "charge", retry.OutcomePermanent, t0.Add(1*time.Hour)),
		record("r2", "email", retry.OutcomeExhausted, t0.Add(2*time.Hour)),
		record("r3", "email", retry.OutcomeDeadline, t0.Add(3*time.Hour)),
		record("r4", "charge", retry.OutcomeExhausted, t0.Add(4*time.Hour)),
		record("r5", "ship", retry.OutcomeMaxElapsed, t0.Add(5*time.Hour)),
	}
	var put []retry.DeadLetter
	// Out of order: List orders by GaveUp.
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		f.put(recs[i])
		put = append(put, recs[i])
	}
	if !f.mark("r4") {
		f.t.Fatal("MarkRedriven(r4): false, want true")
	}
	return put
}

// filterCases select from the records of seed.
var filterCases = []struct {
	name string
	f    deadletter.Filter
	want []string
}{
	{"name", deadletter.Filter{Name: "charge"}, []string{"r0", "r1", "r4"}},
	{"unknown name", deadletter.Filter{Name: "nope"}, []string{}},
	{"one reason", deadletter.Filter{Reasons: []retry.Outcome{retry.OutcomeExhausted}}, []string{"r0", "r2", "r4"}},
	{"two reasons", deadletter.Filter{Reasons: []retry.Outcome{retry.OutcomeDeadline, retry.OutcomePermanent}}, []string{"r1", "r3"}},
	{"since is inclusive", deadletter.Filter{Since: t0.Add(4 * time.Hour)}, []string{"r4", "r5"}},
	{"until is exclusive", deadletter.Filter{Until: t0.Add(2 * time.Hour)}, []string{"r0", "r1"}},
	{"range", deadletter.Filter{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, []string{"r1", "r2"}},
	{"pending", deadletter.Filter{State: deadletter.Pending}, []string{"r0", "r1", "r2", "r3", "r5"}},
	{"redriven", deadletter.Filter{State: deadletter.Redriven}, []string{"r4"}},
	{"ids", deadletter.Filter{IDs: []string{"r5", "r2", "zz"}}, []string{"r2", "r5"}},
	{"empty ids select nothing", deadletter.Filter{IDs: []string{}}, []string{}},
	{"empty reasons select nothing", deadletter.Filter{Reasons: []retry.Outcome{}}, []string{}},
	{"limit keeps the oldest", deadletter.Filter{Limit: 2}, []string{"r0", "r1"}},
	{"all together", deadletter.Filter{Name: "charge", Reasons: []retry.Outcome{retry.OutcomeExhausted}, State: deadletter.Pending, Since: t0.Add(-time.Hour)}, []string{"r0"}},
}

// testListFilters: List selects what Filter.Select selects, and Match
// what both select, for each filter of filterCases.
func testListFilters(t *testing.T, f *fixture) {
	f.seed()
	all := f.list(deadletter.Filter{})
	if got := ids(all); !slices.Equal(got, []string{"r0", "r1", "r2", "r3", "r4", "r5"}) {
		t.Fatalf("List of every record: %v, want r0 to r5, oldest first, whatever the order written", got)
	}
	// The records as List gives them, Redriven set, in the order put.
	unordered := make([]retry.DeadLetter, 0, len(all))
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		unordered = append(unordered, all[i])
	}
	for _, c := range filterCases {
		t.Run(c.name, func(t *testing.T) {
			f := &fixture{t: t, h: f.h, sink: f.sink}
			if got := ids(f.list(c.f)); !slices.Equal(got, c.want) {
				t.Errorf("List: %v, want %v", got, c.want)
			}
			sel, err := c.f.Select(unordered)
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if got := ids(sel); !slices.Equal(got, c.want) {
				t.Errorf("Select: %v, want %v", got, c.want)
			}
			if c.f.Limit == 0 {
				for _, dl := range unordered {
					if got, want := c.f.Match(dl), slices.Contains(c.want, dl.ID); got != want {
						t.Errorf("Match(%s): %v, want %v", dl.ID, got, want)
					}
				}
			}
		})
	}
}

// nonsense are filters that cannot select anything meaningful.
func nonsense() map[string]deadletter.Filter {
	now := time.Now()
	return map[string]deadletter.Filter{
		"negative limit":    {Limit: -1},
		"since after until": {Since: now, Until: now.Add(-time.Hour)},
		"empty range":       {Since: now, Until: now},
		"success reason":    {Reasons: []retry.Outcome{retry.OutcomeSuccess}},
		"unknown reason":    {Reasons: []retry.Outcome{99}},
		"unknown state":     {State: 7},
	}
}

// testFilterRejectsNonsense: Validate, Select, List and Purge refuse the
// filters of nonsense with an error wrapping retry.ErrInvalidOption.
func testFilterRejectsNonsense(t *testing.T, f *fixture) {
	ctx := context.Background()
	f.seed()
	for name, flt := range nonsense() {
		if err := flt.Validate(); !errors.Is(err, retry.ErrInvalidOption) {
			t.Errorf("%s: Validate: %v, want an error wrapping retry.ErrInvalidOption", name, err)
		}
		if _, err := flt.Select(nil); !errors.Is(err, retry.ErrInvalidOption) {
			t.Errorf("%s: Select: %v, want an error wrapping retry.ErrInvalidOption", name, err)
		}
		if l, ok := f.sink.(Lister); ok {
			if _, err := l.List(ctx, flt); !errors.Is(err, retry.ErrInvalidOption) {
				t.Errorf("%s: List: %v, want an error wrapping retry.ErrInvalidOption", name, err)
			}
		}
		if p, ok := f.sink.(Purger); ok {
			if _, err := p.Purge(ctx, flt); !errors.Is(err, retry.ErrInvalidOption) {
				t.Errorf("%s: Purge: %v, want an error wrapping retry.ErrInvalidOption", name, err)
			}
		}
	}
	if got := sortedIDs(f.pending()); !slices.Equal(got, []string{"r0", "r1", "r2", "r3", "r5"}) {
		t.Errorf("pending after refused purges: %v, want r0 r1 r2 r3 r5", got)
	}
	if _, ok := f.sink.(Lister); ok {
		if got := ids(f.list(deadletter.Filter{})); len(got) != 6 {
			t.Errorf("after refused purges: %v left, want r0 to r5", got)
		}
	}
}

// testPurge: Purge deletes the records List would return, and says how
// many; a purged record cannot be marked, and the sink keeps working.
func testPurge(t *testing.T, f *fixture) {
	f.seed()
	step := func(flt deadletter.Filter, n int, left ...string) {
		t.Helper()
		if got := f.purge(flt); got != n {
			t.Errorf("Purge(%+v): %d purged, want %d", flt, got, n)
		}
		if got := ids(f.list(deadletter.Filter{})); !slices.Equal(got, left) {
			t.Errorf("after Purge(%+v): %v left, want %v", flt, got, left)
		}
	}
	step(deadletter.Filter{IDs: []string{}}, 0, "r0", "r1", "r2", "r3", "r4", "r5") // an empty selection of IDs purges nothing
	step(deadletter.Filter{IDs: []string{"r3", "missing"}}, 1, "r0", "r1", "r2", "r4", "r5")
	step(deadletter.Filter{State: deadletter.Redriven}, 1, "r0", "r1", "r2", "r5")
	if f.mark("r4") {
		t.Error("MarkRedriven of a purged record: true, want false")
	}
	// The sink keeps working after a purge.
	f.put(record("r6", "ship", retry.OutcomeExhausted, t0.Add(6*time.Hour)))
	if got := ids(f.list(deadletter.Filter{})); !slices.Equal(got, []string{"r0", "r1", "r2", "r5", "r6"}) {
		t.Errorf("after a Put: %v, want r0 r1 r2 r5 r6", got)
	}
	if !f.mark("r6") {
		t.Error("MarkRedriven of a record put after a purge: false, want true")
	}
	step(deadletter.Filter{Name: "charge", Until: t0.Add(time.Hour)}, 1, "r1", "r2", "r5", "r6")
	step(deadletter.Filter{Limit: 2}, 2, "r5", "r6") // the two oldest
	step(deadletter.Filter{}, 2)
	if p := f.pending(); len(p) != 0 {
		t.Errorf("Pending after purging every record: %v", ids(p))
	}
}
