"""`python -m memory`: see memory.doors.cli."""

from __future__ import annotations

from memory.doors.cli import main

raise SystemExit(main())
