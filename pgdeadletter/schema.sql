-- Dead letters of github.com/steadfast-go/retry, one row per record.
-- {{table}} and the {{..._idx}} names are filled in by the sink; every
-- statement is idempotent. IDs sort bytewise (COLLATE "C"), as in Go, so
-- that Filter.Select and List agree on the order.
CREATE TABLE IF NOT EXISTS {{table}} (
    id              text        COLLATE "C" PRIMARY KEY,
    name            text        NOT NULL,
    idempotency_key text        NOT NULL DEFAULT '',
    payload         bytea,
    attempts        bigint      NOT NULL,
    first_attempt   timestamptz,
    gave_up         timestamptz NOT NULL,
    reason          text        NOT NULL,
    last_error      text        NOT NULL DEFAULT '',
    errors          jsonb       NOT NULL DEFAULT '[]',
    redrives        integer     NOT NULL DEFAULT 0,
    redrive_of      text        NOT NULL DEFAULT '',
    redriven        timestamptz,
    stored_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS {{name_idx}} ON {{table}} (name, gave_up);
CREATE INDEX IF NOT EXISTS {{reason_idx}} ON {{table}} (reason, gave_up);
CREATE INDEX IF NOT EXISTS {{gave_up_idx}} ON {{table}} (gave_up);
CREATE INDEX IF NOT EXISTS {{pending_idx}} ON {{table}} (gave_up, id) WHERE redriven IS NULL;
