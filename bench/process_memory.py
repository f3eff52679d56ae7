"""The process's own memory, as Linux counts it (/proc/self/status): what a bench run in a process of
its own reads before and after the work it measures."""

from __future__ import annotations

from pathlib import Path


def status_bytes(field: str) -> int:
    """A size field of /proc/self/status (VmRSS: resident now; VmHWM: the resident high-water mark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")
