package deadletter

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/steadfast-go/retry"
)

// MemorySink is a [Source] in memory for tests and examples: not durable,
// it keeps records in the order put, the first per ID, until
// [MemorySink.Purge], and filters as the other sinks do. It is safe for
// concurrent use; the zero value is an empty sink. Do not copy one in use.
type MemorySink struct {
	mu   sync.Mutex // guards recs and byID
	recs []retry.DeadLetter
	byID map[string]int // index in recs
}

// NewMemorySink returns an empty sink.
func NewMemorySink() *MemorySink {
	return &MemorySink{byID: make(map[string]int)}
}

// Put stores a [Clip]ped copy of dl, or nothing, returning nil, when dl.ID
// is stored already. dl.ID must not be empty and dl.Reason must be a
// failure outcome, or Put fails wrapping retry.ErrInvalidOption; it fails
// too when ctx is done.
func (m *MemorySink) Put(ctx context.Context, dl retry.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl.ID == "" {
		// Records are kept by ID: a second one without would be lost.
		return fmt.Errorf("%w: MemorySink.Put: the dead letter has no ID", retry.ErrInvalidOption)
	}
	if !failure(dl.Reason) {
		// A FileSink or a PostgreSQL sink refuses it: so does the sink
		// that stands in for them in tests.
		return fmt.Errorf("%w: MemorySink.Put: dead letter %s: its reason, outcome %d, is not a failure outcome", retry.ErrInvalidOption, dl.ID, uint8(dl.Reason))
	}
	dl = cloneDeadLetter(Clip(dl))
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.byID[dl.ID]; dup {
		return nil // the first record with an ID wins, as in a FileSink
	}
	if m.byID == nil { // the zero MemorySink
		m.byID = make(map[string]int)
	}
	m.byID[dl.ID] = len(m.recs)
	m.recs = append(m.recs, dl)
	return nil
}

// Records returns copies of every record, redriven ones included, in the
// order they were put.
func (m *MemorySink) Records() []retry.DeadLetter {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]retry.DeadLetter, len(m.recs))
	for i, dl := range m.recs {
		out[i] = cloneDeadLetter(dl)
	}
	return out
}

// Len returns the number of records, redriven ones included.
func (m *MemorySink) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// Pending returns copies of the records not yet marked by [Redrive], in
// the order they were put.
func (m *MemorySink) Pending(ctx context.Context) ([]retry.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []retry.DeadLetter
	for _, dl := range m.recs {
		if dl.Redriven.IsZero() {
			out = append(out, cloneDeadLetter(dl))
		}
	}
	return out, nil
}

// MarkRedriven marks the record id as redriven now; see [Source].
func (m *MemorySink) MarkRedriven(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.byID[id]
	if !ok || !m.recs[i].Redriven.IsZero() {
		return false, nil
	}
	m.recs[i].Redriven = time.Now()
	return true, nil
}

// List returns copies of the records f selects: what [Filter.Select]
// returns of [MemorySink.Records].
func (m *MemorySink) List(ctx context.Context, f Filter) ([]retry.DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	sel, err := f.Select(m.recs) // Select validates f
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for i, dl := range sel {
		sel[i] = cloneDeadLetter(dl)
	}
	return sel, nil
}

// Purge deletes the records [MemorySink.List] would return (the zero
// Filter: all) and returns how many. A purged ID is unknown again:
// MarkRedriven reports false, and a Put stores a new record.
func (m *MemorySink) Purge(ctx context.Context, f Filter) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sel, err := f.Select(m.recs) // Select validates f
	if err != nil || len(sel) == 0 {
		return 0, err
	}
	drop := make(map[string]bool, len(sel))
	for _, dl := range sel {
		drop[dl.ID] = true
	}
	m.recs = slices.DeleteFunc(m.recs, func(dl retry.DeadLetter) bool { return drop[dl.ID] })
	if m.byID == nil { // a zero MemorySink's records
		m.byID = make(map[string]int, len(m.recs))
	}
	clear(m.byID)
	for i, dl := range m.recs {
		m.byID[dl.ID] = i
	}
	return len(sel), nil
}

// cloneDeadLetter copies the slices of dl, so that a stored record shares
// no memory with its caller.
func cloneDeadLetter(dl retry.DeadLetter) retry.DeadLetter {
	dl.Payload = slices.Clone(dl.Payload)
	dl.Errors = slices.Clone(dl.Errors)
	return dl
}

var _ Source = (*MemorySink)(nil)
