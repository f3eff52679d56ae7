"""A new user's first run, timed: `pip install '.[embedded]'` into a fresh venv, then the README's
"Using the library" example as it stands there, until it prints the recalled fact.

    python -m bench.first_run            # needs PyPI; writes results/first-run/first_run.jsonl and .md

pip runs with `--no-cache-dir`, so every package is fetched as a new user's would be (the machine's
own wheel mirrors, where pip is configured with them, still count). The example runs from the venv's
interpreter in an empty directory, so it imports the installed package, never the clone, on an
embedded Postgres in a temporary data directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "results" / "first-run"
#: what the example prints last when it recalled the fact
RECALLED = "Our budget is $120k per year."


def readme_blocks(heading: str, language: str = "python", readme: Path = README) -> list[str]:
    """The fenced `language` blocks of the README section that starts with `heading`, in order."""
    text = readme.read_text()
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ", 1)[0]
    ends = [i for i in (text.find(f"\n{level} ", start + 1), len(text)) if i != -1]
    section = text[start : min(ends)]
    blocks, fence = [], f"```{language}\n"
    at = section.find(fence)
    while at != -1:
        body_start = at + len(fence)
        body_end = section.index("\n```", body_start)
        blocks.append(section[body_start : body_end + 1])
        at = section.find(fence, body_end + 4)
    return blocks


def library_example() -> str:
    """The first Python block under "## Using the library": the example a new user pastes."""
    return readme_blocks("## Using the library")[0]


def readme_test_module() -> str:
    """The pytest module under "### Testing your agent with this memory"."""
    return readme_blocks("### Testing your agent with this memory")[0]


def example_env(data_dir: Path) -> dict[str, str]:
    """The example's environment: no DATABASE_URL, the embedded server's data in `data_dir`."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTHONPATH", "VIRTUAL_ENV")}
    env["BEADS_DATA_DIR"] = str(data_dir)
    return env


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--extra", default="embedded", help="the extra to install (default: embedded)")
    parser.add_argument("--out", type=Path, default=RESULTS / "first_run")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="beads-first-run-"))
    try:
        venv = work / "venv"
        python = venv / "bin" / "python"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        made_venv = time.perf_counter() - started
        install = [str(python), "-m", "pip", "install", "--no-cache-dir", f"{ROOT}[{args.extra}]"]
        began = time.perf_counter()
        installed = subprocess.run(install, capture_output=True, text=True)
        install_s = time.perf_counter() - began
        if installed.returncode != 0:
            print(installed.stdout + installed.stderr, file=sys.stderr)
            return 1
        # the project itself is always built from its source; anything else would be a compile
        built = [
            line
            for line in installed.stdout.splitlines()
            if line.strip().startswith("Building wheel for")
            and "langgraph-beads-memory" not in line
            and "langgraph_beads_memory" not in line
        ]
        script = work / "example.py"
        script.write_text(library_example())
        run_dir = work / "run"
        run_dir.mkdir()
        began = time.perf_counter()
        ran = subprocess.run(
            [str(python), str(script)],
            cwd=run_dir,
            env=example_env(work / "data"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        example_s = time.perf_counter() - began
        lines = ran.stdout.strip().splitlines()
        recalled = ran.returncode == 0 and bool(lines) and lines[-1] == RECALLED
        packages = subprocess.run(
            [str(python), "-m", "pip", "list", "--format", "freeze"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        row = {
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": f"pip install --no-cache-dir '.[{args.extra}]' into a fresh venv, then the README example",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "venv_s": round(made_venv, 1),
            "install_s": round(install_s, 1),
            "example_s": round(example_s, 1),
            "total_s": round(made_venv + install_s + example_s, 1),
            "venv_mb": round(_size_mb(venv)),
            "packages": len(packages),
            "source_builds": len(built),
            "recalled": recalled,
            "example_output": ran.stdout if recalled else ran.stdout + ran.stderr,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.with_suffix(".jsonl").open("a") as rows:
        rows.write(json.dumps(row) + "\n")
    summary = (
        f"# A new user's first run\n\n`python -m bench.first_run` ({row['at']}, Python {row['python']}, "
        f"{row['cpus']} CPUs): {row['command']}.\n\n"
        "| step | seconds |\n|---|---:|\n"
        f"| a fresh venv | {row['venv_s']} |\n"
        f"| `pip install --no-cache-dir '.[{args.extra}]'` | {row['install_s']} |\n"
        f"| the README's example, to the recalled fact | {row['example_s']} |\n"
        f"| **total** | **{row['total_s']}** |\n\n"
        f"{row['packages']} packages, {row['venv_mb']} MB, {row['source_builds']} built from source besides "
        "the project; "
        f"recalled: {'yes' if recalled else 'NO'}. What the example printed:\n\n"
        f"```\n{row['example_output'].strip()}\n```\n"
    )
    args.out.with_suffix(".md").write_text(summary)
    print(summary)
    return 0 if recalled else 1


if __name__ == "__main__":
    raise SystemExit(main())
