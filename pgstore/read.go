package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/steadfast-go/retry/idempotency"
)

// read returns key's row (key is the key's bytes, boxed) as a Claim when
// it is live, held or completed and retained, at now (nil: the server's
// now()). It is a replay's only statement, so it decodes the row from the
// wire itself (see decodeRow).
func (s *Store) read(ctx context.Context, key any, now *time.Time) (idempotency.Claim, bool, error) {
	rows, err := s.pool.Query(ctx, s.q.read, key, now)
	if err != nil {
		return idempotency.Claim{}, false, err
	}
	defer rows.Close() // if decodeRow panics
	if !rows.Next() {  // which closes rows
		return idempotency.Claim{}, false, rows.Err()
	}
	c, err := decodeRow(rows)
	rows.Close() // reads the statement's end, whose error Err reports
	if err == nil {
		err = rows.Err()
	}
	return c, err == nil, err
}

// decodeRow turns the read's row (fingerprint, completed, permanent,
// value, error) into a Claim. In binary format, pgx's choice for bytea and
// bool on a cached statement, it reads the bytes as they are, copying
// each once and allocating nothing else; the generic Scan, which any
// other format takes, builds scan plans and boxes for every row.
func decodeRow(rows pgx.Rows) (idempotency.Claim, error) {
	var (
		fp                   []byte
		completed, permanent bool
		rec                  idempotency.StoredOutcome
	)
	if raw, ok := binaryRow(rows); ok {
		fp, completed, permanent = raw[0], raw[1][0] != 0, raw[2][0] != 0
		rec.Value = bytes.Clone(raw[3]) // nil (NULL) stays nil
		rec.Error = string(raw[4])      // text: the same bytes in either format
	} else {
		var err error
		if fp, completed, permanent, rec, err = scanRow(rows); err != nil {
			return idempotency.Claim{}, err
		}
	}
	if !completed {
		return idempotency.Claim{Status: idempotency.ClaimHeld, Fingerprint: string(fp)}, nil
	}
	rec.Permanent = permanent
	return idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: string(fp), Outcome: rec}, nil
}

// scanRow reads the row with pgx's Scan, in any format. It is a function
// of its own so that only it pays for the locals Scan makes escape.
func scanRow(rows pgx.Rows) (fp []byte, completed, permanent bool, rec idempotency.StoredOutcome, err error) {
	var msg pgtype.Text
	if err := rows.Scan(&fp, &completed, &permanent, &rec.Value, &msg); err != nil {
		return nil, false, false, rec, fmt.Errorf("reading the row: %w", err)
	}
	rec.Error = msg.String
	return fp, completed, permanent, rec, nil
}

// binaryRow returns the row's raw values when the bytea and bool columns
// came in binary format and hold what the schema says: a fingerprint and
// two one-byte booleans, never NULL.
func binaryRow(rows pgx.Rows) ([][]byte, bool) {
	fields, raw := rows.FieldDescriptions(), rows.RawValues()
	if len(fields) != 5 || len(raw) != 5 || raw[0] == nil || len(raw[1]) != 1 || len(raw[2]) != 1 {
		return nil, false
	}
	for _, f := range fields[:4] {
		if f.Format != pgx.BinaryFormatCode {
			return nil, false
		}
	}
	return raw, true
}
