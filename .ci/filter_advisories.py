"""Rebuild `.ci/advisories/`: the OSV records of an advisory database for the packages uv.lock pins.

CI reaches the package registries but not OSV, and no registry package ships a current advisory
database, so the offline audit (`.ci/audit-deps` when OSV cannot be reached) reads a snapshot kept in
the repository. It holds only what the audit can use: every record about a package the lock names
(whatever versions it affects, so a later lock that moves a pin back onto a vulnerable version is
still caught), copied unchanged, and `manifest.json` saying where they came from.

    python .ci/filter_advisories.py DATABASE [--lock uv.lock] [--out .ci/advisories]
                                    [--commit SHA --date YYYY-MM-DD]
    python .ci/filter_advisories.py --check [--lock uv.lock] [--out .ci/advisories]

The second says whether the snapshot was filtered for every package the lock now pins (a package
added since has no records in it); `.ci/audit-deps` runs it before an offline audit.

DATABASE is a folder of OSV records (`.yaml` or `.json`, in any sub-folders): a checkout of the PyPA
advisory database (github.com/pypa/advisory-database), or OSV's export of the PyPI ecosystem
unzipped. The source's commit and date are read with git where DATABASE is in a git work tree, else
given. Needs PyYAML for `.yaml` records: `uv run --no-project --with pyyaml python .ci/...`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_packages(lock: Path) -> list[str]:
    """The canonical name of every package uv.lock pins (every extra and group, the project itself)."""
    return sorted({canonical(p["name"]) for p in tomllib.loads(lock.read_text()).get("package", [])})


def read_record(path: Path) -> dict[str, Any] | None:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        record = json.loads(text)
    else:
        import yaml

        record = yaml.safe_load(text)
    return record if isinstance(record, dict) and "id" in record else None


def pypi_names(record: dict[str, Any]) -> set[str]:
    return {
        canonical(a["package"]["name"])
        for a in record.get("affected", [])
        if a.get("package", {}).get("ecosystem") == "PyPI" and a["package"].get("name")
    }


def _git(database: Path, *args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", "-C", str(database), *args], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def git_source(database: Path, project: Path) -> tuple[str, str] | None:
    """The commit and its date (YYYY-MM-DD) of the git work tree holding `database`, if it is in
    one other than this project's (an export unzipped inside the project is not its commit)."""
    top = _git(database, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() == project.resolve():
        return None
    out = (_git(database, "log", "-1", "--format=%H %cs") or "").split()
    return (out[0], out[1]) if len(out) == 2 else None


def build(database: Path, lock: Path, out: Path, commit: str, date: str) -> dict[str, Any]:
    """Replace the records under `out` with those of `database` about the packages `lock` pins."""
    wanted = set(locked_packages(lock))
    kept: dict[str, Path] = {}
    read = 0
    for path in sorted(database.rglob("*")):
        if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        record = read_record(path)
        if record is None:
            continue
        read += 1
        if pypi_names(record) & wanted and not record.get("withdrawn"):
            kept[record["id"]] = path
    if out.exists():
        shutil.rmtree(out)
    covered: set[str] = set()
    for path in kept.values():
        target = out / path.relative_to(database)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        covered |= pypi_names(read_record(path) or {}) & wanted
    manifest = {
        "source": "PyPA advisory database, https://github.com/pypa/advisory-database (CC-BY-4.0)",
        "commit": commit,
        "date": date,
        "records_in_source": read,
        "records": len(kept),
        "packages_with_records": len(covered),
        # what the snapshot was filtered for: a package the lock adds later has no records here
        "packages": sorted(wanted),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def uncovered(lock: Path, out: Path) -> list[str]:
    """The packages `lock` pins that the snapshot under `out` was not filtered for (all of them when
    there is no snapshot): their advisories, if any, are not in it."""
    try:
        filtered = set(json.loads((out / MANIFEST).read_text())["packages"])
    except (OSError, ValueError, KeyError):
        filtered = set()
    return [name for name in locked_packages(lock) if name not in filtered]


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("database", type=Path, nargs="?", help="a folder of OSV records")
    parser.add_argument(
        "--check", action="store_true", help="only check that the snapshot covers every package the lock pins"
    )
    parser.add_argument("--lock", type=Path, default=root / "uv.lock")
    parser.add_argument("--out", type=Path, default=root / ".ci" / "advisories")
    parser.add_argument("--commit", help="the source's commit (default: read with git)")
    parser.add_argument("--date", help="the source's commit date, YYYY-MM-DD (default: read with git)")
    args = parser.parse_args(argv)
    if args.check:
        missing = uncovered(args.lock, args.out)
        if missing:
            print(
                f"{args.out} was not filtered for {len(missing)} package(s) {args.lock.name} pins "
                f"({', '.join(missing[:8])}{', ...' if len(missing) > 8 else ''}): rebuild it with "
                "a newer advisory database (see .ci/filter_advisories.py)",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.database is None or not args.database.is_dir():
        parser.error(f"{args.database} is not a folder of OSV records")
    source = git_source(args.database, root)
    commit = args.commit or (source[0] if source else None)
    date = args.date or (source[1] if source else None)
    if commit is None or date is None:
        parser.error(f"{args.database} is not in a git work tree: give --commit and --date")
    manifest = build(args.database, args.lock, args.out, commit, date)
    print(
        f"{manifest['records']} of {manifest['records_in_source']} records, for "
        f"{manifest['packages_with_records']} of the {len(manifest['packages'])} locked packages "
        f"(source {commit[:7]}, {date}) -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
