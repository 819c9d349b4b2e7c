package retry

import (
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryDeadLetterSink keeps dead letters in memory, in the order they
// were put. It is meant for tests and examples: it is not durable, and it
// never forgets a record. It implements [RedriveSource]. A
// MemoryDeadLetterSink is safe for concurrent use; build one with
// [NewMemoryDeadLetterSink], as the zero value is not usable.
type MemoryDeadLetterSink struct {
	mu   sync.Mutex // guards recs and byID
	recs []DeadLetter
	byID map[string]int // index in recs
}

// NewMemoryDeadLetterSink returns an empty sink.
func NewMemoryDeadLetterSink() *MemoryDeadLetterSink {
	return &MemoryDeadLetterSink{byID: make(map[string]int)}
}

// Put stores a copy of dl. It fails only when ctx is already done.
func (m *MemoryDeadLetterSink) Put(ctx context.Context, dl DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dl = cloneDeadLetter(dl)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byID[dl.ID] = len(m.recs)
	m.recs = append(m.recs, dl)
	return nil
}

// Records returns copies of every record, redriven ones included, in the
// order they were put.
func (m *MemoryDeadLetterSink) Records() []DeadLetter {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]DeadLetter, len(m.recs))
	for i, dl := range m.recs {
		out[i] = cloneDeadLetter(dl)
	}
	return out
}

// Len returns the number of records, redriven ones included.
func (m *MemoryDeadLetterSink) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// Pending returns copies of the records not yet claimed by [Redrive], in
// the order they were put.
func (m *MemoryDeadLetterSink) Pending(ctx context.Context) ([]DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DeadLetter
	for _, dl := range m.recs {
		if dl.Redriven.IsZero() {
			out = append(out, cloneDeadLetter(dl))
		}
	}
	return out, nil
}

// Claim marks the record id as redriven now; see [RedriveSource].
func (m *MemoryDeadLetterSink) Claim(ctx context.Context, id string) (bool, error) {
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

// cloneDeadLetter copies the slices of dl, so that a stored record shares
// no memory with its caller.
func cloneDeadLetter(dl DeadLetter) DeadLetter {
	dl.Payload = slices.Clone(dl.Payload)
	dl.Errors = slices.Clone(dl.Errors)
	return dl
}
