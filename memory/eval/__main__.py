"""`python -m memory.eval`: see memory.eval.cli."""

from __future__ import annotations

from memory.eval.cli import main

raise SystemExit(main())
