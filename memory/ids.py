"""Derived identifiers: replaying the same conversation into an empty database reproduces them."""

from __future__ import annotations

import functools
import hashlib
import secrets
import uuid

# A fixed root for every uuid5 this library derives.
BEADS_UUID_NAMESPACE = uuid.UUID("6f1c4a52-5b8e-4d7e-9a3b-2c0d1e6f7a81")


def session_uuid(session_id: str) -> uuid.UUID:
    return uuid.uuid5(BEADS_UUID_NAMESPACE, f"session:{session_id}")


def namespace_id(session_id: str, path: tuple[str, ...]) -> uuid.UUID:
    """uuid5(session, path): the root (path ()) gets the same id on every replay."""
    # NUL cannot occur in a Postgres text value, so it is an unambiguous separator.
    return uuid.uuid5(session_uuid(session_id), "\x00".join(("ns", *path)))


def child_segment(label: str) -> str:
    """A forked namespace's path segment: random, so concurrent forks of one label never collide."""
    return f"{label}-{secrets.token_hex(4)}"


def body_sha256(body: str) -> bytes:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).digest()


def fact_id(session_id: str, namespace: uuid.UUID, source: str, source_key: str, body: str) -> uuid.UUID:
    """Content-addressed: a checkpoint replay that re-runs a capture hook maps to the same id."""
    digest = body_sha256(body).hex()
    return uuid.uuid5(session_uuid(session_id), "\x00".join((str(namespace), source, source_key, digest)))


@functools.lru_cache(maxsize=32)
def passage_id(session_id: str, body: str) -> uuid.UUID:
    # cached: every claim of a message names its passage, and hashing a long message once per claim
    # made writing it quadratic in its length
    return uuid.uuid5(session_uuid(session_id), "passage\x00" + body_sha256(body).hex())
