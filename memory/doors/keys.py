"""The rules a bearer key follows wherever the memory is served over HTTP: the playground's JSON API
(`PLAYGROUND_API_KEY`) and `beads-memory mcp --transport http` (`BEADS_MCP_KEY`) accept the same keys
and compare them the same way, so a key good enough for one is good enough for the other.
"""

from __future__ import annotations

import hmac
import math

#: The shortest key accepted: a guessable key is no key.
MIN_KEY_CHARS = 16
#: A key's strength as estimated here: its length times log2 of how many different characters it
#: has. "a" * 16 has none; secrets.token_urlsafe(32) about 200.
MIN_KEY_BITS = 64
MAKE_ONE = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def key_bits(key: str) -> float:
    """The strength estimate MIN_KEY_BITS is compared with (an upper bound, never a guarantee)."""
    distinct = len(set(key))
    return len(key) * math.log2(distinct) if distinct > 1 else 0.0


def key_problem(key: str, name: str) -> str | None:
    """Why `key` is refused as the key called `name`, or None."""
    if len(key) < MIN_KEY_CHARS or key != key.strip() or not key.isascii() or not key.isprintable():
        return (
            f"{name} must be at least {MIN_KEY_CHARS} printable ASCII characters, without "
            f"surrounding spaces; {MAKE_ONE}"
        )
    if key_bits(key) < MIN_KEY_BITS:
        return (
            f"{name} is too weak: {len(key)} characters of only {len(set(key))} different ones "
            f"(about {key_bits(key):.0f} bits, at least {MIN_KEY_BITS} needed); {MAKE_ONE}"
        )
    return None


def key_matches(given: str, expected: str) -> bool:
    """`given` is the key, compared in constant time (surrounding spaces forgiven, as a header's are)."""
    return hmac.compare_digest(given.strip().encode("utf-8", "replace"), expected.encode("utf-8"))


__all__ = ["MIN_KEY_BITS", "MIN_KEY_CHARS", "key_bits", "key_matches", "key_problem"]
