"""How a caller names a fact or a session: by id, short id or the record itself; by session id or
any of its namespaces. Resolved to the ids the SQL takes, in one place for the store and its reads."""

from __future__ import annotations

import uuid

from memory.errors import FactNotFoundError
from memory.model import Fact, Namespace

FactRef = uuid.UUID | str | Fact
# a session, by its id or by any of its namespaces
SessionRef = str | Namespace


def session_of(session: SessionRef) -> str:
    """The session id `session` names."""
    return session.session_id if isinstance(session, Namespace) else session


def plain_id(ref: FactRef) -> uuid.UUID | str:
    """`ref` as an id (a record gives its own), not yet parsed."""
    return ref.id if isinstance(ref, Fact) else ref


def fact_id_of(ref: FactRef) -> uuid.UUID:
    """The fact id `ref` names; a string that is not a UUID (a short id, say) is refused with the
    call that resolves it."""
    if isinstance(ref, Fact):
        return ref.id
    if isinstance(ref, uuid.UUID):
        return ref
    try:
        return uuid.UUID(ref)
    except ValueError:
        raise FactNotFoundError(f"{ref!r} is not a fact id; use store.get(short_id, session_id)") from None
