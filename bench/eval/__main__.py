"""`python -m bench.eval`: see bench.eval.cli."""

from __future__ import annotations

from bench.eval.cli import main

raise SystemExit(main())
