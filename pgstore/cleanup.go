package pgstore

import (
	"context"
	"fmt"
)

// cleanupBatch is how many rows one DELETE of Cleanup removes at most, so
// that a large backlog never holds many row locks or a long transaction.
const cleanupBatch = 1000

// Cleanup deletes the rows whose lease or retention has expired and
// returns how many. The holder of a deleted claim then gets
// [idempotency.ErrLeaseLost] from Renew or Complete, as after a takeover. The
// store never runs it by itself; the package doc's Cost section says how.
func (s *Store) Cleanup(ctx context.Context) (int64, error) {
	now, _ := s.times(0)
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.q.cleanup, now, cleanupBatch)
		if err != nil {
			return total, fmt.Errorf("pgstore: cleanup: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < cleanupBatch {
			return total, nil
		}
	}
}
