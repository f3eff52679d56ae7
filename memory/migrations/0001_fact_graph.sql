-- The fact graph: namespaces (a tree per session), passages, facts, edges, and embedding spaces.
-- Every object lives in the `beads` schema so it can share a database with LangGraph's own tables.

CREATE TABLE beads.namespaces (
    id          uuid PRIMARY KEY,
    session_id  text NOT NULL,
    parent_id   uuid REFERENCES beads.namespaces (id) ON DELETE CASCADE,
    -- ids from the root down to this namespace, inclusive. Scope queries use array containment on
    -- ids, never string prefixes, so no name can match another namespace by LIKE metacharacters.
    lineage     uuid[] NOT NULL,
    path        text[] NOT NULL,
    agent_id    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (lineage[array_length(lineage, 1)] = id),
    CHECK ((parent_id IS NULL) = (array_length(lineage, 1) = 1))
);
CREATE INDEX namespaces_session ON beads.namespaces (session_id);
CREATE INDEX namespaces_parent ON beads.namespaces (parent_id);
CREATE INDEX namespaces_lineage ON beads.namespaces USING gin (lineage);

-- The text a fact was carved from (a whole user message, a tool result). Shared by its facts, so
-- its embedding is computed once.
CREATE TABLE beads.passages (
    id          uuid PRIMARY KEY,
    session_id  text NOT NULL,
    body        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX passages_session ON beads.passages (session_id);

CREATE TABLE beads.facts (
    -- content-addressed: uuid5 of (session, namespace, source, source_key, sha256(body))
    id                   uuid PRIMARY KEY,
    session_id           text NOT NULL,
    namespace_id         uuid NOT NULL REFERENCES beads.namespaces (id) ON DELETE CASCADE,
    kind                 text NOT NULL
        CHECK (kind IN ('user_input', 'directive', 'conclusion', 'summary')),
    status               text NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'superseded', 'archived')),
    source               text NOT NULL
        CHECK (source IN ('passive_capture', 'remember_tool', 'tool_result', 'conclude_task',
                          'fallback_conclude', 'compaction')),
    source_key           text NOT NULL DEFAULT '',
    agent_id             text NOT NULL,
    acting_on_behalf_of  text,
    body                 text NOT NULL CHECK (body <> ''),
    passage_id           uuid REFERENCES beads.passages (id) ON DELETE SET NULL,
    -- provenance: the exact message and the characters of it this fact is
    thread_id            text,
    message_id           text,
    span_start           integer,
    span_end             integer,
    -- the newest fact of this fact's supersedes chain (itself while current); maintained on supersede
    -- so retrieval resolves a stale hit with one join instead of a recursive walk
    head_id              uuid NOT NULL,
    valid_from           timestamptz NOT NULL DEFAULT now(),
    valid_to             timestamptz,
    recorded_at          timestamptz NOT NULL DEFAULT now(),
    metadata             jsonb NOT NULL DEFAULT '{}'::jsonb,
    CHECK (span_start IS NULL OR (span_start >= 0 AND span_end >= span_start)),
    CHECK (valid_to IS NULL OR valid_to >= valid_from)
);
CREATE INDEX facts_namespace ON beads.facts (namespace_id);
CREATE INDEX facts_session ON beads.facts (session_id);
CREATE INDEX facts_head ON beads.facts (head_id) WHERE head_id <> id;
CREATE INDEX facts_agent ON beads.facts (session_id, agent_id);

CREATE TABLE beads.edges (
    src         uuid NOT NULL REFERENCES beads.facts (id) ON DELETE CASCADE,
    relation    text NOT NULL
        CHECK (relation IN ('supersedes', 'rollup_of', 'contradicts', 'relates_to', 'derived_from')),
    dst         uuid NOT NULL REFERENCES beads.facts (id) ON DELETE CASCADE,
    session_id  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (src, relation, dst),
    CHECK (src <> dst)
);
CREATE INDEX edges_dst ON beads.edges (dst, relation);
-- a fact is replaced at most once; a second replacement must target the head of the chain
CREATE UNIQUE INDEX edges_one_successor ON beads.edges (dst) WHERE relation = 'supersedes';

-- One row per embedding space. Vectors of different spaces are never compared: each space gets
-- its own partial HNSW index, created when the embedder is first registered.
CREATE TABLE beads.embedders (
    id          smallint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    dims        integer NOT NULL CHECK (dims BETWEEN 1 AND 2000),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE beads.fact_vectors (
    embedder_id  smallint NOT NULL REFERENCES beads.embedders (id) ON DELETE CASCADE,
    fact_id      uuid NOT NULL REFERENCES beads.facts (id) ON DELETE CASCADE,
    embedding    vector NOT NULL,
    PRIMARY KEY (embedder_id, fact_id)
);
CREATE INDEX fact_vectors_fact ON beads.fact_vectors (fact_id);

CREATE TABLE beads.passage_vectors (
    embedder_id  smallint NOT NULL REFERENCES beads.embedders (id) ON DELETE CASCADE,
    passage_id   uuid NOT NULL REFERENCES beads.passages (id) ON DELETE CASCADE,
    embedding    vector NOT NULL,
    PRIMARY KEY (embedder_id, passage_id)
);
CREATE INDEX passage_vectors_passage ON beads.passage_vectors (passage_id);

-- A session whose every fact has a vector in this space. Search embeds missing vectors lazily
-- (a user who switches embedders keeps their memory) and records the session here, so the common
-- path checks one row instead of anti-joining every fact. A write clears other spaces' rows.
CREATE TABLE beads.vector_coverage (
    session_id   text NOT NULL,
    embedder_id  smallint NOT NULL REFERENCES beads.embedders (id) ON DELETE CASCADE,
    PRIMARY KEY (session_id, embedder_id)
);
