-- Idempotency records of github.com/steadfast-go/retry/pgstore.
-- {{table}} and {{index}} are replaced by the store's validated, quoted
-- names; run it through Store.Migrate, or print it with Store.Schema for a
-- migration tool. Every statement is idempotent.

CREATE TABLE IF NOT EXISTS {{table}} (
    -- The idempotency key and the payload fingerprint are bytea so that
    -- any Go string (NUL bytes, invalid UTF-8) is stored as it is.
    key         bytea       PRIMARY KEY,
    fingerprint bytea       NOT NULL,
    -- Fences the current claim; NULL once the outcome is stored.
    token       text,
    completed   boolean     NOT NULL DEFAULT false,
    -- The end of the lease while claimed, of the retention once completed.
    -- The row is free to claim from this instant on.
    expires_at  timestamptz NOT NULL,
    permanent   boolean     NOT NULL DEFAULT false,
    value       bytea,
    -- A permanent failure's message; invalid UTF-8 and NUL bytes in it
    -- are stored as U+FFFD.
    error       text
);

-- Cleanup deletes rows by expiry.
CREATE INDEX IF NOT EXISTS {{index}} ON {{table}} (expires_at);
