"""`python -m memory`: see memory.cli."""

from __future__ import annotations

from memory.cli import main

raise SystemExit(main())
