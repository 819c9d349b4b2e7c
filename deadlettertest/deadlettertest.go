// Package deadlettertest checks that a dead-letter sink keeps the contract
// that Do and [deadletter.Redrive] rely on, and that the sinks of this
// module share: those of package deadletter ([deadletter.MemorySink],
// [deadletter.FileSink]) and of module pgdeadletter. A sink of your own
// calls [TestSink] from its tests:
//
//	func TestContract(t *testing.T) {
//		deadlettertest.TestSink(t, deadlettertest.Harness{
//			New: func(t *testing.T) deadletter.Source {
//				path := filepath.Join(t.TempDir(), "dl.jsonl")
//				sink, err := deadletter.OpenFile(path, nil)
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { sink.Close() })
//				return sink
//			},
//		})
//	}
//
// The sink must be a [deadletter.Source]: a [retry.DeadLetterSink] whose
// records Redrive can list and mark. When it is also a [Lister], a
// [Purger] or a [Getter], the suite checks those methods too, with the
// semantics of [deadletter.Filter].
//
// It needs only the standard library's testing package.
//
// # What the suite checks
//
// The records [TestSink] puts have times in UTC and in whole
// microseconds, which PostgreSQL keeps exactly, and IDs and names of
// ASCII letters and digits.
//
// Every sink: Put then Pending (and List and Get) gives back every field
// as put, payload bytes exactly; a second Put of an ID keeps the first
// record; Put refuses a record without an ID or whose reason is not a
// failure outcome, with an error wrapping [retry.ErrInvalidOption], and
// fails on a done context; error texts are stored bounded as
// [deadletter.Clip] bounds them, the payload whole; concurrent Puts all
// land; MarkRedriven returns true once per record, also to concurrent
// callers, and false for an unknown one.
//
// A [Lister] and a [Purger]: the [deadletter.Filter] table (names,
// reasons, since and until, states, IDs, limits, empty selections) gives
// what Filter.Select and Filter.Match give; invalid filters are refused;
// Purge deletes what List would return, and only that.
package deadlettertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// Lister is a sink that lists the records a [deadletter.Filter] selects,
// oldest first (by GaveUp, then ID), at most f.Limit, with Redriven set
// for marked records; an invalid f gives an error wrapping
// [retry.ErrInvalidOption].
type Lister interface {
	List(ctx context.Context, f deadletter.Filter) ([]retry.DeadLetter, error)
}

// Purger is a sink that deletes the records a [deadletter.Filter] selects
// (the oldest f.Limit of them when set) and says how many; an invalid f
// is refused as by [Lister]. MarkRedriven does not know a purged record.
type Purger interface {
	Purge(ctx context.Context, f deadletter.Filter) (int, error)
}

// Getter is a sink that returns one record by ID, with Redriven set when
// it was marked, and an error for an unknown ID.
type Getter interface {
	Get(ctx context.Context, id string) (retry.DeadLetter, error)
}

// Harness tells the suite how to make sinks.
type Harness struct {
	// New returns an empty sink for one subtest: a new one, or one on a
	// table or file of its own. Required.
	New func(t *testing.T) deadletter.Source
	// NotFound, when set, is the error that Get's error must match for
	// an unknown ID, such as pgdeadletter.ErrNotFound. Default: any
	// error.
	NotFound error
}

// TestSink runs the contract suite against the sinks h makes, and
// against their List, Purge and Get when they are a [Lister], [Purger]
// or [Getter]. The package doc lists what it checks.
func TestSink(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("deadlettertest: Harness.New is required")
	}
	// A case for a method the sink lacks is left out, not skipped: CI
	// allows no skip, and there is nothing of the sink's to check.
	probe := h.New(t)
	if probe == nil {
		t.Fatal("deadlettertest: Harness.New returned nil")
	}
	for _, c := range contract {
		if c.needs != nil && !c.needs(probe) {
			t.Logf("deadlettertest: %s left out: the sink, a %T, lacks %s", c.name, probe, c.method)
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			sink := h.New(t)
			if sink == nil {
				t.Fatal("deadlettertest: Harness.New returned nil")
			}
			c.run(t, &fixture{t: t, h: h, sink: sink})
		})
	}
}

type testCase struct {
	name   string
	needs  func(deadletter.Source) bool // nil: every sink
	method string                       // what needs looks for, for the skip message
	run    func(*testing.T, *fixture)
}

func isLister(s deadletter.Source) bool { _, ok := s.(Lister); return ok }
func isPurger(s deadletter.Source) bool {
	_, ok := s.(Purger)
	return ok && isLister(s)
}

var contract = []testCase{
	{name: "RoundTrip", run: testRoundTrip},
	{name: "PayloadBytes", run: testPayloadBytes},
	{name: "FirstRecordOfAnIDWins", run: testFirstWins},
	{name: "RefusesRecordWithoutID", run: testRefusesNoID},
	{name: "RefusesReasonThatIsNotAFailure", run: testRefusesReason},
	{name: "DoneContext", run: testDoneContext},
	{name: "ClipsErrorTexts", run: testClip},
	{name: "ConcurrentPuts", run: testConcurrentPuts},
	{name: "ConcurrentPutsOfOneID", run: testConcurrentSameID},
	{name: "MarkRedriven", run: testMarkRedriven},
	{name: "MarkRedrivenConcurrently", run: testMarkConcurrently},
	{name: "FilterRejectsNonsense", run: testFilterRejectsNonsense},
	{name: "ListFilters", needs: isLister, method: "List", run: testListFilters},
	{name: "Purge", needs: isPurger, method: "List or Purge", run: testPurge},
}

// fixture is one subtest's sink, with checked calls.
type fixture struct {
	t    *testing.T
	h    Harness
	sink deadletter.Source
}

func (f *fixture) put(dl retry.DeadLetter) {
	f.t.Helper()
	if err := f.sink.Put(context.Background(), dl); err != nil {
		f.t.Fatalf("Put(%s): %v", dl.ID, err)
	}
}

func (f *fixture) pending() []retry.DeadLetter {
	f.t.Helper()
	recs, err := f.sink.Pending(context.Background())
	if err != nil {
		f.t.Fatalf("Pending: %v", err)
	}
	return recs
}

func (f *fixture) mark(id string) bool {
	f.t.Helper()
	ok, err := f.sink.MarkRedriven(context.Background(), id)
	if err != nil {
		f.t.Fatalf("MarkRedriven(%s): %v", id, err)
	}
	return ok
}

func (f *fixture) list(flt deadletter.Filter) []retry.DeadLetter {
	f.t.Helper()
	recs, err := f.sink.(Lister).List(context.Background(), flt)
	if err != nil {
		f.t.Fatalf("List(%+v): %v", flt, err)
	}
	return recs
}

func (f *fixture) purge(flt deadletter.Filter) int {
	f.t.Helper()
	n, err := f.sink.(Purger).Purge(context.Background(), flt)
	if err != nil {
		f.t.Fatalf("Purge(%+v): %v", flt, err)
	}
	return n
}

// stored returns every record of the sink that the suite can see, by ID:
// the pending ones, and all of them when the sink is a Lister.
func (f *fixture) stored() map[string]retry.DeadLetter {
	f.t.Helper()
	recs := f.pending()
	if _, ok := f.sink.(Lister); ok {
		recs = f.list(deadletter.Filter{})
	}
	out := make(map[string]retry.DeadLetter, len(recs))
	for _, dl := range recs {
		if _, dup := out[dl.ID]; dup {
			f.t.Errorf("record %s is returned twice", dl.ID)
		}
		out[dl.ID] = dl
	}
	return out
}

// readBack checks that each of want reads back equal from Pending, and
// from List and Get when the sink has them, and that nothing else is
// stored.
func (f *fixture) readBack(want ...retry.DeadLetter) {
	f.t.Helper()
	pending := f.pending()
	if got, w := sortedIDs(pending), sortedIDs(want); !slices.Equal(got, w) {
		f.t.Fatalf("Pending returned records %v, want %v", got, w)
	}
	byID := make(map[string]retry.DeadLetter)
	for _, dl := range pending {
		byID[dl.ID] = dl
	}
	for _, w := range want {
		f.same("Pending", byID[w.ID], w)
	}
	if l, ok := f.sink.(Lister); ok {
		recs, err := l.List(context.Background(), deadletter.Filter{})
		if err != nil {
			f.t.Fatalf("List: %v", err)
		}
		sorted, _ := deadletter.Filter{}.Select(want)
		if got, w := ids(recs), ids(sorted); !slices.Equal(got, w) {
			f.t.Fatalf("List returned records %v, want %v (oldest first)", got, w)
		}
		for i, w := range sorted {
			f.same("List", recs[i], w)
		}
	}
	if g, ok := f.sink.(Getter); ok {
		for _, w := range want {
			got, err := g.Get(context.Background(), w.ID)
			if err != nil {
				f.t.Errorf("Get(%s): %v", w.ID, err)
				continue
			}
			f.same("Get", got, w)
		}
		_, err := g.Get(context.Background(), "deadlettertest-unknown")
		switch {
		case err == nil:
			f.t.Error("Get of an unknown ID: no error")
		case f.h.NotFound != nil && !errors.Is(err, f.h.NotFound):
			f.t.Errorf("Get of an unknown ID: %v, want an error matching %v", err, f.h.NotFound)
		}
	}
}

// same reports the fields in which got, read back by method, differs
// from want. Times compare with Equal; a nil and an empty Payload or
// Errors are the same.
func (f *fixture) same(method string, got, want retry.DeadLetter) {
	f.t.Helper()
	if d := diff(got, want); d != "" {
		f.t.Errorf("%s of record %s: %s", method, want.ID, d)
	}
}

func diff(got, want retry.DeadLetter) string {
	var d []string
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		var eq bool
		switch w := w.(type) {
		case time.Time:
			eq = w.Equal(g.(time.Time))
		case []byte:
			eq = bytes.Equal(w, g.([]byte))
		case []retry.AttemptError:
			eq = slices.Equal(w, g.([]retry.AttemptError))
		default:
			eq = reflect.DeepEqual(g, w)
		}
		if !eq {
			gs, ws := fmt.Sprintf("%v", g), fmt.Sprintf("%v", w)
			if len(gs) > 200 || len(ws) > 200 {
				gs, ws = fmt.Sprintf("%d bytes", len(gs)), fmt.Sprintf("%d bytes", len(ws))
			}
			d = append(d, fmt.Sprintf("%s is %s, want %s", name, gs, ws))
		}
	}
	return strings.Join(d, "; ")
}

func ids(recs []retry.DeadLetter) []string {
	out := []string{}
	for _, dl := range recs {
		out = append(out, dl.ID)
	}
	return out
}

func sortedIDs(recs []retry.DeadLetter) []string {
	out := ids(recs)
	slices.Sort(out)
	return out
}

// t0 is the time of the suite's records: UTC, whole microseconds.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// record returns a complete dead letter but for Redriven.
func record(id, name string, reason retry.Outcome, gaveUp time.Time) retry.DeadLetter {
	return retry.DeadLetter{
		ID:             id,
		Name:           name,
		IdempotencyKey: "key-" + id,
		Payload:        []byte(`{"order":"` + id + `"}`),
		Attempts:       3,
		FirstAttempt:   gaveUp.Add(-1500 * time.Millisecond),
		GaveUp:         gaveUp,
		Reason:         reason,
		LastError:      "connection refused",
		Errors: []retry.AttemptError{
			{Attempt: 1, Error: "timeout"},
			{Attempt: 3, Wait: 200 * time.Millisecond, Error: "connection refused"},
		},
	}
}

func testRoundTrip(t *testing.T, f *fixture) {
	full := record("a1", "charge-card", retry.OutcomeExhausted, t0)
	full.Redrives, full.RedriveOf = 2, "a0"
	// Every field but Redriven (which the sink sets when it marks) is
	// set, so that a field added to DeadLetter and not stored fails.
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; name != "Redriven" && v.Field(i).IsZero() {
			t.Fatalf("deadlettertest: set DeadLetter.%s in testRoundTrip", name)
		}
	}
	bare := retry.DeadLetter{ID: "b1", GaveUp: t0.Add(time.Second), Reason: retry.OutcomePermanent}
	want := []retry.DeadLetter{full, bare}
	for o := retry.OutcomePermanent; o <= retry.OutcomeUnknown; o++ {
		want = append(want, record(fmt.Sprintf("o%d", o), "by-reason", o, t0.Add(time.Duration(o)*time.Minute)))
	}
	for _, dl := range want {
		f.put(dl)
	}
	f.readBack(want...)
}

// testPayloadBytes: payloads are opaque bytes, kept exactly, and not
// shared with the caller.
func testPayloadBytes(t *testing.T, f *fixture) {
	every := make([]byte, 0, 512)
	for i := range 256 {
		every = append(every, byte(i))
	}
	every = append(every, "\xff\xfe\x00invalid UTF-8\xc3\x28"...)
	large := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16) // longer than a bufio.Scanner line
	large[100] = '\n'
	var want []retry.DeadLetter
	for i, p := range [][]byte{every, large, []byte("x"), []byte(`{"json":"\n"}`)} {
		dl := record(fmt.Sprintf("p%d", i), "payload", retry.OutcomeExhausted, t0.Add(time.Duration(i)*time.Second))
		dl.Payload = bytes.Clone(p)
		want = append(want, dl)
		put := dl
		put.Payload = bytes.Clone(p)
		f.put(put)
		put.Payload[0] ^= 0xff // the caller's slice changes after Put
	}
	f.readBack(want...)
	for _, dl := range f.pending() {
		clear(dl.Payload) // the records read back are copies too
	}
	f.readBack(want...)
}

func testFirstWins(t *testing.T, f *fixture) {
	first := record("x1", "first", retry.OutcomeExhausted, t0)
	again := first
	again.Name, again.Payload = "second", []byte("second")
	f.put(first)
	if err := f.sink.Put(context.Background(), again); err != nil {
		t.Fatalf("a second Put of an ID: %v, want nil (a Put retried after a timeout)", err)
	}
	f.readBack(first)
}

func testRefusesNoID(t *testing.T, f *fixture) {
	err := f.sink.Put(context.Background(), retry.DeadLetter{Name: "charge", Reason: retry.OutcomeExhausted, GaveUp: t0})
	if !errors.Is(err, retry.ErrInvalidOption) {
		t.Errorf("Put of a record without an ID: %v, want an error wrapping retry.ErrInvalidOption", err)
	}
	if err != nil && !strings.Contains(err.Error(), "no ID") {
		t.Errorf("Put of a record without an ID: %q does not say it has no ID", err)
	}
	f.readBack()
}

func testRefusesReason(t *testing.T, f *fixture) {
	for _, reason := range []retry.Outcome{retry.OutcomeSuccess, retry.OutcomeUnknown + 1, 99} {
		dl := record(fmt.Sprintf("bad%d", reason), "charge", reason, t0)
		err := f.sink.Put(context.Background(), dl)
		if !errors.Is(err, retry.ErrInvalidOption) {
			t.Errorf("Put of a record with reason %d: %v, want an error wrapping retry.ErrInvalidOption", reason, err)
		}
		if err != nil && !strings.Contains(err.Error(), "not a failure outcome") {
			t.Errorf("Put of a record with reason %d: %q does not say it is not a failure outcome", reason, err)
		}
	}
	ok := record("good", "charge", retry.OutcomeExhausted, t0)
	f.put(ok)
	f.readBack(ok)
}

func testDoneContext(t *testing.T, f *fixture) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.sink.Put(ctx, record("c1", "op", retry.OutcomeExhausted, t0)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a done context: %v, want an error matching context.Canceled", err)
	}
	f.readBack()
}

// testClip: a record built by hand with huge errors is stored bounded, as
// deadletter.Clip bounds it, its payload whole (issue #20).
func testClip(t *testing.T, f *fixture) {
	big := strings.Repeat("e", 10<<20)
	dl := record("big1", "charge", retry.OutcomeExhausted, t0)
	dl.Payload = bytes.Repeat([]byte("p"), 1<<20)
	dl.LastError = big
	dl.Attempts = 20
	dl.Errors = nil
	for i := range 20 {
		dl.Errors = append(dl.Errors, retry.AttemptError{Attempt: i + 1, Error: big})
	}
	f.put(dl)
	if len(dl.Errors) != 20 || len(dl.Errors[0].Error) != len(big) || len(dl.LastError) != len(big) {
		t.Error("Put changed the caller's record")
	}
	got, ok := f.stored()["big1"]
	if !ok {
		t.Fatal("the record is not stored")
	}
	if !bytes.Equal(got.Payload, dl.Payload) {
		t.Errorf("the payload is cut: %d bytes stored, %d put", len(got.Payload), len(dl.Payload))
	}
	total := len(got.LastError)
	if len(got.LastError) > 4096 {
		t.Errorf("LastError is %d bytes, want at most 4096", len(got.LastError))
	}
	if !strings.Contains(got.LastError, " bytes cut]…") {
		t.Errorf("LastError does not say how much was cut: %.80q…", got.LastError)
	}
	for _, e := range got.Errors {
		if len(e.Error) > 4096 {
			t.Errorf("the error of attempt %d is %d bytes, want at most 4096", e.Attempt, len(e.Error))
		}
		total += len(e.Error)
	}
	if total > 64<<10 {
		t.Errorf("the record's error texts are %d bytes, want at most %d", total, 64<<10)
	}
	if len(got.Errors) == 0 {
		t.Fatal("no attempt error is kept")
	}
	if a := got.Errors[0].Attempt; a != 1 {
		t.Errorf("the first attempt kept is %d, want 1", a)
	}
	if a := got.Errors[len(got.Errors)-1].Attempt; a != 20 {
		t.Errorf("the last attempt kept is %d, want 20", a)
	}
	f.same("the stored record, against deadletter.Clip's", got, deadletter.Clip(dl))
}

func testConcurrentPuts(t *testing.T, f *fixture) {
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	want := make([]retry.DeadLetter, writers*each)
	for i := range want {
		want[i] = record(fmt.Sprintf("w%03d", i), "concurrent", retry.OutcomeExhausted, t0.Add(time.Duration(i)*time.Millisecond))
	}
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				errs <- f.sink.Put(context.Background(), want[w*each+i])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a concurrent Put: %v", err)
		}
	}
	f.readBack(want...)
}

func testConcurrentSameID(t *testing.T, f *fixture) {
	dl := record("same", "op", retry.OutcomeExhausted, t0)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = f.sink.Put(context.Background(), dl) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("a concurrent Put of one ID: %v", err)
		}
	}
	f.readBack(dl)
}

func testMarkRedriven(t *testing.T, f *fixture) {
	r := []retry.DeadLetter{
		record("m0", "op", retry.OutcomeExhausted, t0),
		record("m1", "op", retry.OutcomeExhausted, t0.Add(time.Second)),
		record("m2", "op", retry.OutcomeExhausted, t0.Add(2*time.Second)),
		record("m3", "op", retry.OutcomeExhausted, t0.Add(3*time.Second)),
	}
	for _, dl := range r[:3] {
		f.put(dl)
	}
	before := time.Now()
	if !f.mark("m1") {
		t.Error("MarkRedriven of a pending record: false, want true")
	}
	if f.mark("m1") {
		t.Error("MarkRedriven of a marked record: true, want false")
	}
	if f.mark("unknown") {
		t.Error("MarkRedriven of an unknown record: true, want false")
	}
	// A record put after the first mark can be marked too.
	f.put(r[3])
	if !f.mark("m3") {
		t.Error("MarkRedriven of a record put after a mark: false, want true")
	}
	pending := f.pending()
	if got := sortedIDs(pending); !slices.Equal(got, []string{"m0", "m2"}) {
		t.Fatalf("Pending after marking m1 and m3: %v, want [m0 m2]", got)
	}
	for _, dl := range pending {
		if !dl.Redriven.IsZero() {
			t.Errorf("pending record %s has Redriven %v", dl.ID, dl.Redriven)
		}
	}
	check := func(method string, dl retry.DeadLetter) {
		t.Helper()
		marked := dl.ID == "m1" || dl.ID == "m3"
		switch {
		case !marked && !dl.Redriven.IsZero():
			t.Errorf("%s: unmarked record %s has Redriven %v", method, dl.ID, dl.Redriven)
		case marked && dl.Redriven.IsZero():
			t.Errorf("%s: marked record %s has no Redriven time", method, dl.ID)
		case marked && (dl.Redriven.Before(before.Add(-time.Minute)) || dl.Redriven.After(time.Now().Add(time.Minute))):
			t.Errorf("%s: record %s has Redriven %v, want the time of the mark, %v", method, dl.ID, dl.Redriven, before)
		}
		want := r[slices.IndexFunc(r, func(w retry.DeadLetter) bool { return w.ID == dl.ID })]
		dl.Redriven = time.Time{}
		f.same(method, dl, want)
	}
	if _, ok := f.sink.(Lister); ok {
		all := f.list(deadletter.Filter{})
		if got := ids(all); !slices.Equal(got, []string{"m0", "m1", "m2", "m3"}) {
			t.Fatalf("List after marking: %v, want every record", got)
		}
		for _, dl := range all {
			check("List", dl)
		}
	}
	if g, ok := f.sink.(Getter); ok {
		for _, w := range r {
			dl, err := g.Get(context.Background(), w.ID)
			if err != nil {
				t.Errorf("Get(%s): %v", w.ID, err)
				continue
			}
			check("Get", dl)
		}
	}
}

// testMarkConcurrently: for each ID, MarkRedriven returns true to one
// caller only, as Redrive needs so that no record is replayed twice.
func testMarkConcurrently(t *testing.T, f *fixture) {
	const recs, callers = 4, 8
	for i := range recs {
		f.put(record(fmt.Sprintf("c%d", i), "op", retry.OutcomeExhausted, t0.Add(time.Duration(i)*time.Second)))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins = make(map[string]int)
	)
	for i := range recs * callers {
		id := fmt.Sprintf("c%d", i%recs)
		wg.Go(func() {
			ok, err := f.sink.MarkRedriven(context.Background(), id)
			if err != nil {
				t.Errorf("MarkRedriven(%s): %v", id, err)
			}
			if ok {
				mu.Lock()
				wins[id]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range recs {
		id := fmt.Sprintf("c%d", i)
		if wins[id] != 1 {
			t.Errorf("MarkRedriven(%s) returned true to %d of %d concurrent callers, want 1", id, wins[id], callers)
		}
	}
	if p := f.pending(); len(p) != 0 {
		t.Errorf("Pending after marking every record: %v", ids(p))
	}
}
