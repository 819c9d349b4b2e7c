package pgstore

import (
	"context"
	"fmt"
)

// cleanupBatch is how many rows one DELETE of Cleanup removes at most, so
// that a large backlog never holds many row locks or a long transaction.
const cleanupBatch = 1000

// Cleanup deletes the rows whose lease or retention has expired and
// returns how many it deleted. Expired rows are already free to claim, so
// deleting them changes no outcome; it only keeps the table and its
// indexes small. A claim whose lease expired is deleted too: its holder
// then gets [retry.ErrLeaseLost] from Renew or Complete, as after a
// takeover.
//
// The store never runs Cleanup by itself; call it from a periodic job
// (every few minutes is plenty). It deletes in batches of 1000 rows,
// skipping rows locked by running claims, until none is left or ctx is
// done; any number of processes may run it at once.
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
