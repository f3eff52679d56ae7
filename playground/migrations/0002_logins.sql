-- The pages' logins (playground.logins). The cookie holds a random token; this table holds only its
-- SHA-256, so a row read from a backup opens nothing. Logging out deletes the row: a cookie replayed
-- after that is no login. A login replaces the browser's earlier one, and every login ends when it
-- expires or when the key changes (key_check is an HMAC of a fixed text made with the key).

CREATE TABLE playground.logins (
    token_hash  bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    key_check   bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
-- a login deletes the expired rows as it goes
CREATE INDEX logins_expiry ON playground.logins (expires_at);
