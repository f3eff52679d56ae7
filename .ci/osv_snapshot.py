"""The OSV API over a snapshot of advisories, on loopback, for `uv audit --service-url`.

`uv audit` asks an OSV service which of the locked versions have advisories (POST /v1/querybatch),
then reads each one (GET /v1/vulns/<id>). Where that service cannot be reached, this answers the
same two calls from a folder of OSV records (`.yaml` or `.json`, in any sub-folders): a clone of the
PyPA advisory database, or OSV's own export of the PyPI ecosystem unzipped.

    python .ci/osv_snapshot.py ADVISORIES PORT_FILE

serves on a free port of 127.0.0.1, writes the port to PORT_FILE once it listens, and stops on
SIGTERM. A version is affected when an advisory lists it, or when it falls in one of its ECOSYSTEM
ranges (introduced <= version < fixed, or <= last_affected).
"""

from __future__ import annotations

import json
import re
import signal
import sys
from collections import defaultdict
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load(folder: Path) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Every PyPI advisory under `folder`: by id, and by the canonical name of each package it affects."""
    by_id: dict[str, dict[str, Any]] = {}
    by_package: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        record = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        if not isinstance(record, dict) or "id" not in record or record.get("withdrawn"):
            continue
        by_id[record["id"]] = record
        for affected in record.get("affected", []):
            package = affected.get("package", {})
            if package.get("ecosystem") == "PyPI" and package.get("name"):
                by_package[canonical(package["name"])].append(record)
    return by_id, by_package


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def affects(record: dict[str, Any], name: str, version: str) -> bool:
    wanted = _version(version)
    for affected in record.get("affected", []):
        package = affected.get("package", {})
        if package.get("ecosystem") != "PyPI" or canonical(package.get("name", "")) != name:
            continue
        if version in affected.get("versions", []):
            return True
        if wanted is None:
            continue
        for found in affected.get("ranges", []):
            if found.get("type") != "ECOSYSTEM":
                continue
            inside = False
            for event in found.get("events", []):
                if "introduced" in event:
                    start = event["introduced"]
                    inside = start == "0" or ((v := _version(start)) is not None and wanted >= v)
                elif "fixed" in event and inside:
                    fixed = _version(event["fixed"])
                    inside = fixed is None or wanted < fixed
                    if inside:
                        return True
                elif "last_affected" in event and inside:
                    last = _version(event["last_affected"])
                    if last is None or wanted <= last:
                        return True
                    inside = False
            if inside:  # introduced and never fixed
                return True
    return False


def _timestamp(value: Any) -> str:
    """YAML reads OSV's timestamps as datetimes: back to RFC 3339, as the API sends them."""
    if isinstance(value, datetime):
        zone = value if value.tzinfo else value.replace(tzinfo=UTC)
        return zone.astimezone(UTC).isoformat().replace("+00:00", "Z")
    raise TypeError(f"{type(value).__name__} is not JSON")


def serve(folder: Path, port_file: Path) -> None:
    by_id, by_package = load(folder)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: Any) -> None:
            payload = json.dumps(body, default=_timestamp).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/querybatch":
                self._answer(404, {"message": "not found"})
                return
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
            results = []
            for query in request.get("queries", []):
                name = canonical(query.get("package", {}).get("name", ""))
                version = query.get("version", "")
                vulns = [
                    {"id": r["id"], "modified": r.get("modified", "")}
                    for r in by_package.get(name, [])
                    if affects(r, name, version)
                ]
                results.append({"vulns": vulns} if vulns else {})
            found = sum(len(r.get("vulns", [])) for r in results)
            print(f"osv snapshot: {len(results)} versions asked about, {found} advisories", file=sys.stderr)
            self._answer(200, {"results": results})

        def do_GET(self) -> None:
            prefix = "/v1/vulns/"
            record = by_id.get(self.path[len(prefix) :]) if self.path.startswith(prefix) else None
            if record is None:
                self._answer(404, {"message": "not found"})
            else:
                self._answer(200, record)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"osv snapshot: {len(by_id)} advisories for {len(by_package)} packages", file=sys.stderr)
    port_file.write_text(str(server.server_address[1]))
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), Path(sys.argv[2]))
