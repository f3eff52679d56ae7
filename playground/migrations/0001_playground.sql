-- The playground's own tables: chats, turns (each turn is also its job), messages and the per-turn
-- event log. They live in the `playground` schema, next to the library's `beads` schema and LangGraph's
-- checkpointer tables.

CREATE TABLE playground.chats (
    id             uuid PRIMARY KEY,
    -- one chat is one memory session in both lanes
    session_id     text NOT NULL UNIQUE,
    title          text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    walkthrough    boolean NOT NULL DEFAULT false,
    -- counters bumped under this row's lock: turn numbers, and the chat-wide event number that
    -- orders every event of every turn in commit order (the id of the chat's SSE stream)
    last_turn_no   integer NOT NULL DEFAULT 0,
    last_event_no  bigint NOT NULL DEFAULT 0,
    -- set when a delete starts: no worker claims this chat's turns any more
    deleted_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE playground.turn_worker (
    id                uuid PRIMARY KEY,
    chat_id           uuid NOT NULL REFERENCES playground.chats (id) ON DELETE CASCADE,
    turn_no           integer NOT NULL,
    idempotency_key   text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 100),
    status            text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done')),
    stock_status      text NOT NULL DEFAULT 'pending'
                      CHECK (stock_status IN ('pending', 'running', 'done', 'error')),
    beads_status      text NOT NULL DEFAULT 'pending'
                      CHECK (beads_status IN ('pending', 'running', 'done', 'error')),
    -- a new LangGraph thread per message in each lane; kept so a restart resumes on the same thread
    stock_thread_id   text NOT NULL,
    beads_thread_id   text NOT NULL,
    attempts          integer NOT NULL DEFAULT 0,
    -- the worker holding the turn, the advisory-lock key that says that worker is alive, and when
    -- its lease lapses if it stops renewing it
    lease_owner       uuid,
    lease_key         integer,
    lease_expires_at  timestamptz,
    -- the per-turn event sequence: the last number given out
    last_seq          integer NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    UNIQUE (chat_id, turn_no),
    UNIQUE (chat_id, idempotency_key)
);
CREATE INDEX turns_unfinished ON playground.turn_worker (chat_id, turn_no) WHERE status <> 'done';

CREATE TABLE playground.messages (
    turn_id     uuid NOT NULL REFERENCES playground.turn_worker (id) ON DELETE CASCADE,
    chat_id     uuid NOT NULL REFERENCES playground.chats (id) ON DELETE CASCADE,
    -- the user's message, or a lane's final reply: one of each per turn
    author      text NOT NULL CHECK (author IN ('user', 'stock', 'beads')),
    body        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (turn_id, author)
);
CREATE INDEX messages_chat ON playground.messages (chat_id);

CREATE TABLE playground.events (
    chat_id     uuid NOT NULL REFERENCES playground.chats (id) ON DELETE CASCADE,
    event_no    bigint NOT NULL,
    turn_id     uuid NOT NULL REFERENCES playground.turn_worker (id) ON DELETE CASCADE,
    seq         integer NOT NULL,
    lane        text NOT NULL CHECK (lane IN ('turn', 'stock', 'beads')),
    kind        text NOT NULL,
    payload     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, event_no),
    UNIQUE (turn_id, seq)
);
