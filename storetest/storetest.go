// Package storetest checks that an [idempotency.Store] keeps the
// contract Do relies on. Store implementations call [TestIdempotencyStore],
// [TestExactlyOnce] and [TestUnknownOutcome] from their own tests:
//
//	func TestStore(t *testing.T) {
//		mock := clock.NewMock()
//		storetest.TestIdempotencyStore(t, storetest.Harness{
//			New: func(t *testing.T) idempotency.Store {
//				return memstore.New(&memstore.Options{Clock: mock})
//			},
//			Advance: func(t *testing.T, d time.Duration) { mock.Add(d) },
//		})
//	}
//
// [NewFaultProxy] puts a TCP proxy between a store's client and its
// server that cuts connections at random or on demand, for tests of how
// Do behaves when the network fails.
//
// It needs only the standard library's testing package.
//
// # What the suites check
//
// [TestExactlyOnceUnderFaults] runs rounds about one Lease apart; after
// the first, a round calls only the keys no call has replayed yet, whose
// outcome may be lost (their claim has lapsed by then), until every key
// is replayed or MaxRounds. It checks what the store and Do promise
// together:
//   - every key's fn ran exactly once in all (an outcome Do could not
//     record for a whole lease would let a later round run fn again:
//     under these faults, that is Do or the store giving up too soon);
//   - no fn ran after a call with its key returned nil;
//   - a call that ran fn returned nil, or an error that passes
//     [CheckNotRecorded] with fn's value;
//   - a replay returns the value of one of the key's runs;
//   - every key is replayed at last.
//
// [TestOutcomeAfterFault] has fn succeed and the store then fail:
//   - "fault-ends-within-lease": the fault ends after the first Complete
//     failed. Do still records the outcome and returns nil with fn's
//     value; the next call replays it, and fn ran once.
//   - "fault-outlasts-lease": Do keeps trying to record the outcome for at
//     least half the lease and gives up before the claim's lease could
//     run out. Its error passes [CheckNotRecorded] (and matches
//     StoreError), and DoValue still returns fn's value.
//
// [TestUnknownOutcome] ends the caller's context while fn runs, after fn
// acted, and lets fn outlive its lease:
//   - "at-most-once": the next call, at once and after the lease, replays
//     an error matching [retry.ErrOutcomeUnknown]; fn ran once.
//   - "at-least-once": the next call at once finds the key held; after
//     the lease, a call runs fn again.
//   - "renewed-while-fn-runs": fn runs five leases; a caller that comes
//     meanwhile finds the key held, the call succeeds, and fn ran once.
//
// These suites take real time: each subtest of TestOutcomeAfterFault
// about one Lease, each of TestUnknownOutcome a few leases against a
// server (its waits are time.Sleep).
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/steadfast-go/retry/idempotency"
)

// Harness tells the suite how to make stores and move their time.
type Harness struct {
	// New returns a store for one subtest, holding no key the subtest
	// uses: a fresh store, or a shared server with a fresh key prefix or
	// table. The suite also puts a random prefix on its keys. Required.
	New func(t *testing.T) idempotency.Store
	// Advance moves the store's clock forward by at least d: mock.Add(d)
	// for a store on a mock clock, time.Sleep(d) for a server. Required.
	Advance func(t *testing.T, d time.Duration)
	// Short is the lease and retention that the suite lets run out, by
	// calling Advance(2*Short). Keep it well above the store's time
	// resolution, such as 20ms for a server on loopback. Default: 1s.
	Short time.Duration
}

// long is a lease or retention that never runs out during a test.
const long = time.Hour

// TestIdempotencyStore runs the contract suite against the stores h makes:
// claim, renew, complete and release; fencing of stale tokens; lease and
// retention expiry; fingerprints; and one winner among concurrent claims.
func TestIdempotencyStore(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Advance == nil {
		t.Fatal("storetest: Harness.New and Harness.Advance are required")
	}
	if h.Short <= 0 {
		h.Short = time.Second
	}
	prefix := randomPrefix(t)
	for _, tc := range contract {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, h, &fixture{t: t, store: h.New(t), key: prefix + tc.name})
		})
	}
}

// fixture is one subtest's store and key, with checked store calls.
type fixture struct {
	t     *testing.T
	store idempotency.Store
	key   string
}

func (f *fixture) claim(key, fp string, lease time.Duration) idempotency.Claim {
	f.t.Helper()
	cl, err := f.store.Claim(context.Background(), key, fp, lease)
	if err != nil {
		f.t.Fatalf("Claim(%q, %q, %v): unexpected error: %v", key, fp, lease, err)
	}
	return cl
}

// acquire claims key and fails the test unless the claim is acquired.
func (f *fixture) acquire(key, fp string, lease time.Duration) string {
	f.t.Helper()
	cl := f.claim(key, fp, lease)
	if cl.Status != idempotency.ClaimAcquired {
		f.t.Fatalf("Claim(%q) on a free key: status %v, want acquired", key, cl.Status)
	}
	if cl.Token == "" {
		f.t.Fatalf("Claim(%q) acquired with an empty token", key)
	}
	return cl.Token
}

// expect claims key and checks the status and the stored fingerprint.
func (f *fixture) expect(key, fp string, want idempotency.ClaimStatus, wantFP string) idempotency.Claim {
	f.t.Helper()
	cl := f.claim(key, fp, long)
	if cl.Status != want {
		f.t.Fatalf("Claim(%q): status %v, want %v", key, cl.Status, want)
	}
	if want != idempotency.ClaimAcquired && cl.Fingerprint != wantFP {
		f.t.Errorf("Claim(%q) %v: fingerprint %q, want %q", key, cl.Status, cl.Fingerprint, wantFP)
	}
	return cl
}

func (f *fixture) complete(key, token string, rec idempotency.StoredOutcome, retention time.Duration) {
	f.t.Helper()
	if err := f.store.Complete(context.Background(), key, token, rec, retention); err != nil {
		f.t.Fatalf("Complete(%q) with the holding token: %v", key, err)
	}
}

func (f *fixture) wantLeaseLost(op string, err error) {
	f.t.Helper()
	if !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Errorf("%s with a token that does not hold the key: got %v, want an error matching idempotency.ErrLeaseLost", op, err)
	}
}

func sameRecord(t *testing.T, got, want idempotency.StoredOutcome) {
	t.Helper()
	if got.Permanent != want.Permanent || got.Error != want.Error || !bytes.Equal(got.Value, want.Value) {
		t.Errorf("stored record: got {Permanent:%v Value:%q Error:%q}, want {Permanent:%v Value:%q Error:%q}",
			got.Permanent, got.Value, got.Error, want.Permanent, want.Value, want.Error)
	}
}

var contract = []struct {
	name string
	run  func(t *testing.T, h Harness, f *fixture)
}{
	{"claim-free-key-acquires", func(t *testing.T, h Harness, f *fixture) {
		f.acquire(f.key, "fp1", long)
	}},
	{"claim-held-key-reports-held-with-fingerprint", func(t *testing.T, h Harness, f *fixture) {
		f.acquire(f.key, "fp1", long)
		cl := f.expect(f.key, "fp2", idempotency.ClaimHeld, "fp1")
		if cl.Token != "" {
			t.Errorf("Claim on a held key returned token %q, want none", cl.Token)
		}
	}},
	{"empty-fingerprint-round-trips", func(t *testing.T, h Harness, f *fixture) {
		f.acquire(f.key, "", long)
		f.expect(f.key, "", idempotency.ClaimHeld, "")
	}},
	{"tokens-are-unique", func(t *testing.T, h Harness, f *fixture) {
		t1 := f.acquire(f.key+"/a", "", long)
		t2 := f.acquire(f.key+"/b", "", long)
		if err := f.store.Release(context.Background(), f.key+"/a", t1); err != nil {
			t.Fatalf("Release: %v", err)
		}
		t3 := f.acquire(f.key+"/a", "", long)
		if t1 == t2 || t1 == t3 || t2 == t3 {
			t.Errorf("tokens %q, %q, %q: want all different", t1, t2, t3)
		}
	}},
	{"complete-stores-value-and-fingerprint", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		rec := idempotency.StoredOutcome{Value: []byte("{\"id\":42,\"bytes\":\"\\u0000\xff\"}")}
		f.complete(f.key, tok, rec, long)
		cl := f.expect(f.key, "fp1", idempotency.ClaimCompleted, "fp1")
		sameRecord(t, cl.Outcome, rec)
		// A second look replays the same record: it is not consumed.
		cl = f.expect(f.key, "fp2", idempotency.ClaimCompleted, "fp1")
		sameRecord(t, cl.Outcome, rec)
	}},
	{"complete-stores-permanent-failure", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		rec := idempotency.StoredOutcome{Permanent: true, Error: "card declined: insufficient funds"}
		f.complete(f.key, tok, rec, long)
		sameRecord(t, f.expect(f.key, "fp1", idempotency.ClaimCompleted, "fp1").Outcome, rec)
	}},
	{"completed-key-refuses-its-token", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		rec := idempotency.StoredOutcome{Value: []byte("1")}
		f.complete(f.key, tok, rec, long)
		f.wantLeaseLost("Renew after Complete", f.store.Renew(context.Background(), f.key, tok, long))
		// A second Complete may be a re-sent call (its reply was lost), so
		// nil is fine as well as ErrLeaseLost; the record must not change.
		if err := f.store.Complete(context.Background(), f.key, tok, idempotency.StoredOutcome{Value: []byte("2")}, long); err != nil && !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Errorf("Complete after Complete: got %v, want nil or an error matching idempotency.ErrLeaseLost", err)
		}
		if err := f.store.Release(context.Background(), f.key, tok); err != nil {
			t.Errorf("Release after Complete: got %v, want nil", err)
		}
		sameRecord(t, f.expect(f.key, "fp1", idempotency.ClaimCompleted, "fp1").Outcome, rec)
	}},
	{"release-frees-the-key", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		if err := f.store.Release(context.Background(), f.key, tok); err != nil {
			t.Fatalf("Release with the holding token: %v", err)
		}
		f.acquire(f.key, "fp2", long)
		f.expect(f.key, "fp1", idempotency.ClaimHeld, "fp2")
	}},
	{"wrong-token-changes-nothing", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		bad := tok + "x"
		f.wantLeaseLost("Renew", f.store.Renew(context.Background(), f.key, bad, long))
		f.wantLeaseLost("Complete", f.store.Complete(context.Background(), f.key, bad, idempotency.StoredOutcome{Value: []byte("x")}, long))
		if err := f.store.Release(context.Background(), f.key, bad); err != nil {
			t.Errorf("Release with a wrong token: got %v, want nil", err)
		}
		f.expect(f.key, "fp1", idempotency.ClaimHeld, "fp1")
		f.wantLeaseLost("Renew of a never-claimed key", f.store.Renew(context.Background(), f.key+"/none", tok, long))
		f.wantLeaseLost("Complete of a never-claimed key", f.store.Complete(context.Background(), f.key+"/none", tok, idempotency.StoredOutcome{}, long))
		f.complete(f.key, tok, idempotency.StoredOutcome{Value: []byte("ok")}, long)
	}},
	{"lease-keeps-key-until-it-expires", func(t *testing.T, h Harness, f *fixture) {
		f.acquire(f.key, "fp1", long)
		h.Advance(t, 2*h.Short)
		f.expect(f.key, "fp2", idempotency.ClaimHeld, "fp1")
	}},
	{"expired-lease-is-taken-over-and-fenced", func(t *testing.T, h Harness, f *fixture) {
		old := f.acquire(f.key, "fp1", h.Short)
		h.Advance(t, 2*h.Short)
		tok := f.acquire(f.key, "fp2", long)
		if tok == old {
			t.Fatalf("takeover reused the old token %q", old)
		}
		f.wantLeaseLost("Renew by the old holder", f.store.Renew(context.Background(), f.key, old, long))
		f.wantLeaseLost("Complete by the old holder", f.store.Complete(context.Background(), f.key, old, idempotency.StoredOutcome{Value: []byte("stale")}, long))
		if err := f.store.Release(context.Background(), f.key, old); err != nil {
			t.Errorf("Release by the old holder: got %v, want nil", err)
		}
		f.expect(f.key, "fp1", idempotency.ClaimHeld, "fp2")
		rec := idempotency.StoredOutcome{Value: []byte("fresh")}
		f.complete(f.key, tok, rec, long)
		sameRecord(t, f.expect(f.key, "fp2", idempotency.ClaimCompleted, "fp2").Outcome, rec)
	}},
	{"renew-sets-lease-from-now", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		if err := f.store.Renew(context.Background(), f.key, tok, h.Short); err != nil {
			t.Fatalf("Renew with the holding token: %v", err)
		}
		h.Advance(t, 2*h.Short)
		f.acquire(f.key, "fp2", long)
	}},
	{"renewed-lease-outlasts-the-first", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		if err := f.store.Renew(context.Background(), f.key, tok, long); err != nil {
			t.Fatalf("Renew with the holding token: %v", err)
		}
		h.Advance(t, 2*h.Short)
		f.expect(f.key, "fp2", idempotency.ClaimHeld, "fp1")
		f.complete(f.key, tok, idempotency.StoredOutcome{Value: []byte("done")}, long)
	}},
	{"retention-expiry-frees-the-key", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		f.complete(f.key, tok, idempotency.StoredOutcome{Value: []byte("v1")}, h.Short)
		h.Advance(t, 2*h.Short)
		tok2 := f.acquire(f.key, "fp2", long)
		f.expect(f.key, "fp1", idempotency.ClaimHeld, "fp2")
		f.wantLeaseLost("Complete by the first holder after retention", f.store.Complete(context.Background(), f.key, tok, idempotency.StoredOutcome{Value: []byte("v1")}, long))
		f.complete(f.key, tok2, idempotency.StoredOutcome{Value: []byte("v2")}, long)
	}},
	{"retention-keeps-record-until-it-expires", func(t *testing.T, h Harness, f *fixture) {
		tok := f.acquire(f.key, "fp1", long)
		rec := idempotency.StoredOutcome{Value: []byte("kept")}
		f.complete(f.key, tok, rec, long)
		h.Advance(t, 2*h.Short)
		sameRecord(t, f.expect(f.key, "fp1", idempotency.ClaimCompleted, "fp1").Outcome, rec)
	}},
	{"keys-are-independent", func(t *testing.T, h Harness, f *fixture) {
		f.acquire(f.key+"/a", "fp1", long)
		f.acquire(f.key+"/b", "fp1", long)
		f.expect(f.key+"/a", "fp1", idempotency.ClaimHeld, "fp1")
	}},
	{"long-key", func(t *testing.T, h Harness, f *fixture) {
		key := string(bytes.Repeat([]byte("k"), 255-len(f.key)-1)) + "/" + f.key
		if len(key) > 255 {
			key = key[len(key)-255:]
		}
		tok := f.acquire(key, "fp1", long)
		f.complete(key, tok, idempotency.StoredOutcome{Value: []byte("v")}, long)
		f.expect(key, "fp1", idempotency.ClaimCompleted, "fp1")
	}},
	{"done-context-fails", func(t *testing.T, h Harness, f *fixture) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := f.store.Claim(ctx, f.key, "fp1", long); err == nil {
			t.Errorf("Claim with a cancelled context: got nil error, want one")
		}
	}},
	{"one-winner-among-concurrent-claims", func(t *testing.T, h Harness, f *fixture) {
		const n = 32
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			statuses [n]idempotency.ClaimStatus
			errs     [n]error
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var cl idempotency.Claim
				cl, errs[i] = f.store.Claim(context.Background(), f.key, "fp1", long)
				statuses[i] = cl.Status
			}()
		}
		close(start)
		wg.Wait()
		acquired := 0
		for i := range n {
			if errs[i] != nil {
				t.Errorf("concurrent Claim %d: %v", i, errs[i])
			}
			switch statuses[i] {
			case idempotency.ClaimAcquired:
				acquired++
			case idempotency.ClaimHeld:
			default:
				t.Errorf("concurrent Claim %d: status %v, want acquired or held", i, statuses[i])
			}
		}
		if acquired != 1 {
			t.Errorf("%d of %d concurrent claims acquired the key, want exactly 1", acquired, n)
		}
	}},
}

// randomPrefix returns a prefix that keeps keys apart between runs.
func randomPrefix(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("storetest: random prefix: %v", err)
	}
	return "storetest:" + hex.EncodeToString(b[:]) + ":"
}
