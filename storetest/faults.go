package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
)

// CheckNotRecorded returns nil when err is what Do returns for work that
// ran but whose outcome was not recorded: it matches
// [retry.ErrOutcomeNotRecorded], not [retry.ErrIdempotencyUnavailable],
// and holds a [*retry.Error] with [retry.OutcomePermanent]. Otherwise its
// error says what is missing.
func CheckNotRecorded(err error) error {
	var missing []string
	if !errors.Is(err, retry.ErrOutcomeNotRecorded) {
		missing = append(missing, "it does not match retry.ErrOutcomeNotRecorded")
	}
	if errors.Is(err, retry.ErrIdempotencyUnavailable) {
		missing = append(missing, "it matches retry.ErrIdempotencyUnavailable, which says fn did not run")
	}
	var e *retry.Error
	switch {
	case !errors.As(err, &e):
		missing = append(missing, "errors.As finds no *retry.Error")
	case e.Outcome != retry.OutcomePermanent:
		missing = append(missing, fmt.Sprintf("its *retry.Error has outcome %v, not %v", e.Outcome, retry.OutcomePermanent))
	}
	if missing == nil {
		return nil
	}
	return fmt.Errorf("error %v: %s", err, strings.Join(missing, "; "))
}

// ExactlyOnceUnderFaults configures [TestExactlyOnceUnderFaults].
type ExactlyOnceUnderFaults struct {
	// Store is the store under test. Its client must reach its server
	// through Proxy, and should not retry on its own, so that the cuts
	// reach Do. Required.
	Store idempotency.Store
	// Proxy carries all of Store's traffic. Required.
	Proxy *FaultProxy
	// CutProbability is set on Proxy while the callers run, and 0 after.
	// Default: 0.02.
	CutProbability float64
	// Goroutines is how many callers there are. Default: 32.
	Goroutines int
	// Keys is how many keys there are. Default: 200.
	Keys int
	// CallersPerKey is how many of the callers call Do with each key, in
	// each round, in the same order, so that they contend for it; each
	// caller has Keys*CallersPerKey/Goroutines keys or so. Every call
	// through the proxy may cut a connection, and a new connection may
	// cost the server much more than a call, so fewer calls keep the
	// check fast. At most Goroutines. Default: 4.
	CallersPerKey int
	// Lease is the idempotency lease, and about the pause between
	// rounds, so that a key whose outcome was left unrecorded is free in
	// the next round. Default: 1s.
	Lease time.Duration
	// StoreTimeout bounds each store call. Default: 250ms.
	StoreTimeout time.Duration
	// MaxRounds bounds the rounds: a key not replayed by then fails the
	// check. Default: 4.
	MaxRounds int
	// Options are added after the check's own: the store, Lease and
	// StoreTimeout, no waiting for another caller's outcome, and 3
	// attempts 2ms apart without jitter, so that a caller that finds a
	// key held moves on soon.
	Options []retry.Option
	// Timeout bounds the whole check. Default: 1 minute.
	Timeout time.Duration
}

// FaultReport is what [TestExactlyOnceUnderFaults] saw. Its String is a
// summary for test logs.
type FaultReport struct {
	Keys, Goroutines, CallersPerKey, Rounds int
	Calls                                   int   // calls of Do
	Ran                                     int   // calls that ran fn
	PlainSuccesses                          int   // calls that returned nil: ran fn, or replayed
	Replayed                                int   // calls that returned nil without running fn
	NotRecorded                             int   // calls that ran fn and returned an error matching ErrOutcomeNotRecorded
	NotRecordedButStored                    int   // of those, calls whose value a later call replayed: the outcome was stored after all
	Unavailable                             int   // calls that failed closed, without running fn
	InProgress                              int   // calls that gave up on a key another caller held
	OtherErrors                             int   // calls that failed otherwise, without running fn
	KeysRunMoreThanOnce                     int   // keys whose fn ran more than once, in all
	MaxRunsPerKey                           int   // the most runs of one key's fn
	KeysNeverRun                            int   // keys whose fn never ran
	RanAfterPlainSuccess                    int   // runs of fn that began after a call for the key returned nil
	CompleteErrors                          int   // calls of the store's Complete that failed
	KeysWithCompleteErrors                  int   // keys with at least one of them
	DuplicatesCompleteFailed                int   // keys run more than once that had one of them
	RandomCuts                              int64 // connections the proxy cut
	RoundKeys                               []int // how many keys each round called
	RoundTimes                              []time.Duration
	Elapsed                                 time.Duration // in all, pauses between rounds included
}

// String sums the report up in one line, for a test log.
func (r FaultReport) String() string {
	return fmt.Sprintf("%d keys, %d callers, %d per key, %d rounds (keys %v, times %v), %v in all: %d calls, %d connections cut; "+
		"fn ran %d times (%d keys more than once, at most %d; %d keys never; %d runs after a plain success); "+
		"%d plain successes (%d replays); %d not recorded (%d stored after all); "+
		"%d failed closed, %d gave up on a held key, %d other errors; "+
		"Complete failed %d times on %d keys (%d of the keys run more than once)",
		r.Keys, r.Goroutines, r.CallersPerKey, r.Rounds, r.RoundKeys, r.RoundTimes, r.Elapsed.Round(time.Millisecond), r.Calls, r.RandomCuts,
		r.Ran, r.KeysRunMoreThanOnce, r.MaxRunsPerKey, r.KeysNeverRun, r.RanAfterPlainSuccess,
		r.PlainSuccesses, r.Replayed, r.NotRecorded, r.NotRecordedButStored,
		r.Unavailable, r.InProgress, r.OtherErrors,
		r.CompleteErrors, r.KeysWithCompleteErrors, r.DuplicatesCompleteFailed)
}

// TestExactlyOnceUnderFaults has Goroutines callers call retry.DoValue,
// CallersPerKey of them with each of Keys keys, in rounds, while Proxy
// cuts the store's connections at random; it logs and returns the
// figures. The package doc lists what it checks.
func TestExactlyOnceUnderFaults(t *testing.T, c ExactlyOnceUnderFaults) FaultReport {
	t.Helper()
	if c.Store == nil || c.Proxy == nil {
		t.Fatal("storetest: ExactlyOnceUnderFaults.Store and .Proxy are required")
	}
	c.defaults()
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	started := time.Now()

	f := &faultRun{c: c, keys: make([]*keyRecord, c.Keys), byKey: map[string]*keyRecord{}}
	prefix := randomPrefix(t)
	for i := range f.keys {
		k := &keyRecord{key: fmt.Sprintf("%sorder-%d", prefix, i), values: map[string]bool{}}
		f.keys[i], f.byKey[k.key] = k, k
	}
	opts := append([]retry.Option{
		retry.WithIdempotency(ObservedStore{c.Store, f.completeDone}, &retry.IdempotencyOptions{Lease: c.Lease, StoreTimeout: c.StoreTimeout, FailWhileHeld: true}),
		retry.WithBackoff(retry.Constant(2 * time.Millisecond)),
		retry.WithJitter(retry.NoJitter),
		retry.WithMaxAttempts(3),
	}, c.Options...)
	r, err := retry.New(opts...)
	if err != nil {
		t.Fatalf("storetest: retry.New: %v", err)
	}

	if err := c.Proxy.SetCutProbability(c.CutProbability); err != nil {
		t.Fatal(err)
	}
	cutsBefore := c.Proxy.Stats().RandomCuts
	active := make([]bool, c.Keys)
	for i := range active {
		active[i] = true
	}
	for round := 1; ; round++ {
		roundStart := time.Now()
		f.round(ctx, r, round, active)
		f.report.RoundTimes = append(f.report.RoundTimes, time.Since(roundStart).Round(time.Millisecond))
		f.report.Rounds = round
		if ctx.Err() != nil {
			t.Errorf("storetest: the check ran out of time (%v) in round %d", c.Timeout, round)
			break
		}
		if !f.unreplayed(active) || round >= c.MaxRounds {
			break
		}
		// Let every claim whose outcome was not recorded lapse.
		time.Sleep(c.Lease + 100*time.Millisecond)
	}
	_ = c.Proxy.SetCutProbability(0)
	f.report.RandomCuts = c.Proxy.Stats().RandomCuts - cutsBefore
	f.report.Elapsed = time.Since(started)
	f.check(t)
	t.Logf("storetest: under faults: %v", f.report)
	if len(f.samples) > 0 {
		t.Logf("storetest: some errors:\n\t%s", strings.Join(f.samples, "\n\t"))
	}
	return f.report
}

func (c *ExactlyOnceUnderFaults) defaults() {
	if c.CutProbability == 0 {
		c.CutProbability = 0.02
	}
	if c.Goroutines <= 0 {
		c.Goroutines = 32
	}
	if c.Keys <= 0 {
		c.Keys = 200
	}
	if c.CallersPerKey <= 0 {
		c.CallersPerKey = 4
	}
	c.CallersPerKey = min(c.CallersPerKey, c.Goroutines)
	if c.Lease <= 0 {
		c.Lease = time.Second
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 250 * time.Millisecond
	}
	if c.MaxRounds <= 0 {
		c.MaxRounds = 4
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Minute
	}
}

// faultRun is the state of one TestExactlyOnceUnderFaults.
type faultRun struct {
	c     ExactlyOnceUnderFaults
	keys  []*keyRecord
	byKey map[string]*keyRecord

	mu         sync.Mutex
	report     FaultReport
	violations map[string][]string // what went wrong, with examples
	samples    []string            // errors of some calls that failed
}

// keyRecord is what happened to one key; its fields are under faultRun.mu.
type keyRecord struct {
	key             string
	runs            int
	succeeded       bool            // a call returned nil
	values          map[string]bool // the values fn returned
	notRecorded     []string        // values of calls that reported ErrOutcomeNotRecorded
	replayed        map[string]bool // values replayed
	replays         int
	completeErrors  int
	ranAfterSuccess int
}

// round has every caller call Do once for each of its active keys.
// Caller g has the keys i with i%groups == g%groups: the callers of a
// group share theirs.
func (f *faultRun) round(ctx context.Context, r *retry.Retrier, round int, active []bool) {
	n := 0
	for _, a := range active {
		if a {
			n++
		}
	}
	f.report.RoundKeys = append(f.report.RoundKeys, n)
	groups := max(f.c.Goroutines/f.c.CallersPerKey, 1)
	var wg sync.WaitGroup
	for g := range f.c.Goroutines {
		wg.Go(func() {
			for i := g % groups; i < len(f.keys); i += groups {
				if ctx.Err() != nil {
					return
				}
				if active[i] {
					f.call(ctx, r, f.keys[i], g, round)
				}
			}
		})
	}
	wg.Wait()
}

// call calls Do once for k and records what happened.
func (f *faultRun) call(ctx context.Context, r *retry.Retrier, k *keyRecord, g, round int) {
	var value string
	ran := false
	v, err := retry.DoValueOn(retry.ContextWithIdempotencyKey(ctx, k.key), r, func(context.Context) (string, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		ran = true
		k.runs++
		if k.succeeded {
			k.ranAfterSuccess++
			f.report.RanAfterPlainSuccess++
		}
		value = fmt.Sprintf("%s run %d by caller %d in round %d", k.key, k.runs, g, round)
		k.values[value] = true
		return value, nil
	})

	f.mu.Lock()
	defer f.mu.Unlock()
	rep := &f.report
	rep.Calls++
	if err == nil {
		k.succeeded = true
		rep.PlainSuccesses++
	}
	switch {
	case ran:
		rep.Ran++
		if err == nil {
			break
		}
		if problem := CheckNotRecorded(err); problem != nil {
			f.violate("fn succeeded but Do returned neither nil nor a proper not-recorded error", k.key, problem.Error())
			break
		}
		rep.NotRecorded++
		k.notRecorded = append(k.notRecorded, value)
		f.sample(err)
		if v != value {
			f.violate("DoValue did not return fn's value with ErrOutcomeNotRecorded", k.key, fmt.Sprintf("got %q, want %q", v, value))
		}
	case err == nil:
		rep.Replayed++
		k.replays++
		if k.replayed == nil {
			k.replayed = map[string]bool{}
		}
		k.replayed[v] = true
		if !k.values[v] {
			f.violate("a replay returned a value no run of fn returned", k.key, fmt.Sprintf("got %q", v))
		}
	case errors.Is(err, retry.ErrOutcomeNotRecorded):
		f.violate("Do reported ErrOutcomeNotRecorded without running fn", k.key, err.Error())
	case errors.Is(err, retry.ErrIdempotencyUnavailable):
		rep.Unavailable++
		f.sample(err)
	case errors.Is(err, retry.ErrInProgress):
		rep.InProgress++
	default:
		rep.OtherErrors++
		f.sample(err)
	}
}

// sample keeps the first few errors of calls that failed, for the log.
func (f *faultRun) sample(err error) {
	if len(f.samples) < 5 || errors.Is(err, retry.ErrOutcomeNotRecorded) {
		f.samples = append(f.samples, err.Error())
	}
}

// completeDone counts a failed Complete of key.
func (f *faultRun) completeDone(key string, err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.report.CompleteErrors++
	if k := f.byKey[key]; k != nil {
		k.completeErrors++
	}
}

// unreplayed sets active to the keys no call has replayed yet: their
// outcome may not be stored. It says whether there are any. A replay
// proves the outcome stored, and a stored outcome lets no one run fn.
func (f *faultRun) unreplayed(active []bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	left := false
	for i, k := range f.keys {
		active[i] = k.replays == 0
		left = left || active[i]
	}
	return left
}

// violate notes a broken promise, with an example.
func (f *faultRun) violate(what, key, detail string) {
	if f.violations == nil {
		f.violations = map[string][]string{}
	}
	f.violations[what] = append(f.violations[what], fmt.Sprintf("key %q: %s", key, detail))
}

// check sums up the keys and fails the test for every broken promise.
func (f *faultRun) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	rep := &f.report
	rep.Keys, rep.Goroutines, rep.CallersPerKey = f.c.Keys, f.c.Goroutines, f.c.CallersPerKey
	for _, k := range f.keys {
		if k.completeErrors > 0 {
			rep.KeysWithCompleteErrors++
		}
		rep.MaxRunsPerKey = max(rep.MaxRunsPerKey, k.runs)
		for _, v := range k.notRecorded {
			if k.replayed[v] {
				rep.NotRecordedButStored++
			}
		}
		switch {
		case k.runs == 0:
			rep.KeysNeverRun++
			f.violate("fn never ran", k.key, "no call got through")
		case k.runs > 1:
			rep.KeysRunMoreThanOnce++
			if k.completeErrors > 0 {
				rep.DuplicatesCompleteFailed++
			}
			f.violate("fn ran more than once", k.key, fmt.Sprintf("%d runs, %d reported not recorded, %d failed Completes", k.runs, len(k.notRecorded), k.completeErrors))
		}
		if k.ranAfterSuccess > 0 {
			f.violate("fn ran again after a call with its key returned nil (a plain success)", k.key, fmt.Sprintf("%d such runs", k.ranAfterSuccess))
		}
		if k.replays == 0 {
			f.violate("no call replayed the outcome", k.key, fmt.Sprintf("in %d rounds; it may not be stored", rep.Rounds))
		}
	}
	for what, examples := range f.violations {
		shown := examples[:min(len(examples), 5)]
		t.Errorf("%s: %d times, e.g.\n\t%s", what, len(examples), strings.Join(shown, "\n\t"))
	}
}

// ObservedStore wraps an [idempotency.Store] and calls AfterComplete,
// if set, with the key and error of each Complete, in the caller's
// goroutine, to see a store call fail or end a fault then. It is as safe
// for concurrent use as the store and AfterComplete are.
type ObservedStore struct {
	idempotency.Store
	AfterComplete func(key string, err error)
}

// Complete calls the wrapped store's Complete, then AfterComplete.
func (s ObservedStore) Complete(ctx context.Context, key, token string, rec idempotency.StoredOutcome, retention time.Duration) error {
	err := s.Store.Complete(ctx, key, token, rec, retention)
	if s.AfterComplete != nil {
		s.AfterComplete(key, err)
	}
	return err
}
