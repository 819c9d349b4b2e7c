// Package memstore is an [idempotency.Store] in process memory, for
// one process and for tests.
//
// # Cost
//
// A [Store] starts no goroutine: expired leases and records are ignored
// when met and swept out when the store grows (a Claim that finds twice
// as many keys as the last sweep left sweeps them all, O(1) per Claim on
// average). A Go map never gives memory back, so a sweep that leaves
// fewer than a quarter of the keys the map has held since it was made
// rebuilds it at its new size: after a peak, memory falls back to within
// a small multiple (2 to 4) of what the keys live at the last sweep need.
// A store that no Claim grows keeps what it holds, expired keys included,
// until one does. BENCHMARKS.md has the figures.
package memstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/internal/clocks"
	"github.com/steadfast-go/retry/internal/isnil"
)

// Store is an [idempotency.Store] in process memory, shared by the
// goroutines of one process; its records do not survive a restart (use a
// Redis or PostgreSQL store for that). It is safe for concurrent use.
// Build one with [New]: the zero Store's methods return an error matching
// [retry.ErrInvalidOption], so Do fails closed without calling fn.
type Store struct {
	clock clock.Clock // nil when the store is unusable; err says why
	err   error       // why the store is unusable, set by New
	// realTime is set when the store measures real time itself: the
	// monotonic clock only, since base (time.Since reads no wall clock).
	realTime bool
	base     time.Time // the clock's reading at New: the timeline's zero

	mu      sync.Mutex // guards the fields below
	entries map[string]memEntry
	tokens  uint64 // the last fencing token handed out
	sweepAt int    // sweep expired entries when len(entries) reaches it
	peak    int    // the most entries the map has held, as of the last sweep
}

// memEntry is one key: held under token until expires, or completed
// (token "") and kept until expires.
type memEntry struct {
	fingerprint string
	token       string
	expires     int64 // nanoseconds on the store's timeline (see Store.now)
	rec         idempotency.StoredOutcome
}

// Options configures [New]. The zero value, like a nil *Options, gives
// the defaults.
type Options struct {
	// Clock measures leases and retention (a *clock.Mock in tests).
	// Default (nil): real time. A nil pointer in the interface, such as
	// (*clock.Mock)(nil), makes every Claim, Renew, Complete and Release
	// return an error naming Options.Clock. The store counts time from
	// the clock's reading at New, in an int64 of nanoseconds: a clock
	// moved more than 292 years from it makes Claim, Renew and Complete
	// return an error matching retry.ErrInvalidOption.
	Clock clock.Clock
}

// minSweep is the size below which the store never sweeps, and
// minRebuild the peak below which a sweep never rebuilds the map: a few
// kilobytes are not worth a copy.
const (
	minSweep   = 64
	minRebuild = 1024
)

// New returns an empty store. opts may be nil. An invalid option makes
// a store whose methods return an error that names it; see [Options].
func New(opts *Options) *Store {
	m := &Store{entries: make(map[string]memEntry), sweepAt: minSweep}
	if opts != nil {
		m.clock = opts.Clock
	}
	switch {
	case m.clock == nil:
		m.clock = clock.New()
		m.realTime = true
	case isnil.Is(m.clock):
		m.err = fmt.Errorf("%w: memstore: Options.Clock (%T)(nil) is a nil pointer, which cannot tell the time (leave Clock nil for real time)", retry.ErrInvalidOption, m.clock)
		m.clock = nil
		return m
	}
	m.base = m.clock.Now()
	return m
}

// A Store never blocks.
var _ idempotency.NonBlocking = (*Store)(nil)

// errZeroStore is what a zero Store's methods return.
var errZeroStore = fmt.Errorf("%w: memstore: a Store must be made with New", retry.ErrInvalidOption)

// errClockRange is what a method returns when Options.Clock has moved
// out of the range of the store's timeline.
var errClockRange = fmt.Errorf("%w: memstore: Options.Clock reads a time more than 292 years away from its reading at New", retry.ErrInvalidOption)

// unusable returns why m cannot work, or nil: one nil check for a store
// made by New with valid options.
func (m *Store) unusable() error {
	if m.clock != nil {
		return nil
	}
	if m.err != nil {
		return m.err
	}
	return errZeroStore
}

// now returns the time on the store's timeline, nanoseconds since its
// clock's reading at New: an int64 is cheaper to add and compare than a
// time.Time. With real time it reads only the monotonic clock, which is
// what time.Time's comparisons use.
func (m *Store) now() (int64, error) {
	if m.realTime {
		return int64(time.Since(m.base)), nil
	}
	d := m.clock.Now().Sub(m.base)
	if d == math.MaxInt64 || d == math.MinInt64 { // Sub saturated
		return 0, errClockRange
	}
	return int64(d), nil
}

// after returns now+d, saturating: a lease too long to count never ends.
func after(now int64, d time.Duration) int64 { return int64(clocks.Later(time.Duration(now), d)) }

// NeverBlocks implements [idempotency.NonBlocking]: every method returns
// after a map operation under the store's mutex, so retry.Do calls the
// store without a timer for IdempotencyOptions.StoreTimeout.
func (*Store) NeverBlocks() {}

// Claim implements [idempotency.Store]. Tokens are increasing decimal
// numbers, unique within the store. The Value of a completed key's Outcome
// is the store's own copy, shared by every Claim that returns it: read it,
// never modify it.
func (m *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (idempotency.Claim, error) {
	now, err := m.start(ctx, key, lease)
	if err != nil {
		return idempotency.Claim{}, err
	}
	m.mu.Lock()
	if e, ok := m.entries[key]; ok && now < e.expires {
		cl := idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: e.fingerprint}
		if e.token == "" {
			cl.Status, cl.Outcome = idempotency.ClaimCompleted, e.rec
		}
		m.mu.Unlock()
		return cl, nil
	}
	if len(m.entries) >= m.sweepAt {
		m.sweep(now)
	}
	m.tokens++
	token := strconv.FormatUint(m.tokens, 10)
	m.entries[key] = memEntry{fingerprint: fingerprint, token: token, expires: after(now, lease)}
	m.mu.Unlock()
	return idempotency.Claim{Status: idempotency.ClaimAcquired, Token: token}, nil
}

// start checks a method's arguments and returns the time on the store's
// timeline.
func (m *Store) start(ctx context.Context, key string, d time.Duration) (int64, error) {
	if err := m.unusable(); err != nil {
		return 0, err
	}
	if err := checkStoreArgs(ctx, key, d); err != nil {
		return 0, err
	}
	return m.now()
}

// Renew implements [idempotency.Store]. An expired lease is honoured
// until another Claim takes the key or a sweep drops it; then Renew
// returns ErrLeaseLost, as the contract allows.
func (m *Store) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	now, err := m.start(ctx, key, lease)
	if err != nil {
		return err
	}
	m.mu.Lock()
	e, ok := m.heldBy(key, token)
	if ok {
		e.expires = after(now, lease)
		m.entries[key] = e
	}
	m.mu.Unlock()
	if !ok {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// Complete implements [idempotency.Store]. It keeps a copy of rec.Value.
func (m *Store) Complete(ctx context.Context, key, token string, rec idempotency.StoredOutcome, retention time.Duration) error {
	now, err := m.start(ctx, key, retention)
	if err != nil {
		return err
	}
	rec = copyOutcome(rec) // outside the lock
	m.mu.Lock()
	e, ok := m.heldBy(key, token)
	if ok {
		m.entries[key] = memEntry{fingerprint: e.fingerprint, expires: after(now, retention), rec: rec}
	}
	m.mu.Unlock()
	if !ok {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// Release implements [idempotency.Store].
func (m *Store) Release(ctx context.Context, key, token string) error {
	if err := m.unusable(); err != nil {
		return err
	}
	if err := checkStoreArgs(ctx, key, 1); err != nil {
		return err
	}
	m.mu.Lock()
	if _, ok := m.heldBy(key, token); ok {
		delete(m.entries, key)
	}
	m.mu.Unlock()
	return nil
}

// heldBy returns key's entry if token holds it. m.mu must be held.
func (m *Store) heldBy(key, token string) (memEntry, bool) {
	e, ok := m.entries[key]
	return e, ok && token != "" && e.token == token
}

// Len returns how many keys the store holds, held or completed, expired
// ones not yet swept included.
func (m *Store) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// sweep drops expired entries and sets the next sweep at twice what is
// left, so that sweeping costs O(1) per claim on average. When fewer than
// a quarter of the map's peak are left, it copies them into a new map:
// deleting keys frees no memory in a Go map. The copy costs O(what is
// left), less than the sweep's own O(peak) pass, so Claim stays O(1) on
// average. m.mu must be held.
func (m *Store) sweep(now int64) {
	m.peak = max(m.peak, len(m.entries))
	for k, e := range m.entries {
		if now >= e.expires {
			delete(m.entries, k)
		}
	}
	if n := len(m.entries); n < m.peak/4 && m.peak > minRebuild {
		fresh := make(map[string]memEntry, n)
		for k, e := range m.entries {
			fresh[k] = e
		}
		m.entries, m.peak = fresh, n
	}
	m.sweepAt = max(2*len(m.entries), minSweep)
}

func checkStoreArgs(ctx context.Context, key string, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("%w: the idempotency key is empty", retry.ErrInvalidOption)
	}
	if d <= 0 {
		return fmt.Errorf("%w: the duration %v must be positive", retry.ErrInvalidOption, d)
	}
	return nil
}

func copyOutcome(r idempotency.StoredOutcome) idempotency.StoredOutcome {
	if r.Value != nil {
		r.Value = append([]byte(nil), r.Value...)
	}
	return r
}
