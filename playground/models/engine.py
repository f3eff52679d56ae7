"""The llama.cpp model behind :class:`playground.models.local.LocalChatModel`, loaded once per process.

A llama.cpp context is not thread-safe: every :class:`Engine` carries the lock that generations
hold for as long as they run. Models are freed at interpreter exit, while the interpreter is whole.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from memory.errors import MissingExtraError, ModelUnavailableError
from memory.extras import import_extra, require_extra
from playground.models.settings import DEFAULT_LOCAL_MODEL, ModelSettings
from playground.models.weights import LOCAL_MODELS, ensure_weights, weights_ready


class LlamaLike(Protocol):
    """The part of ``llama_cpp.Llama`` this model uses (tests pass a stand-in)."""

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]: ...

    def n_ctx(self) -> int: ...

    def create_completion(
        self,
        prompt: list[int],
        *,
        max_tokens: int | None,
        temperature: float,
        stop: list[str],
        seed: int | None,
        stream: bool,
        grammar: Any = None,
    ) -> Any: ...


@dataclass(frozen=True)
class Engine:
    """A loaded model, its lock, and its own thread for async callers.

    The lock gives one generation at a time the context, which is not thread-safe. The thread is
    the model's own so that async generations waiting for their turn do not tie up the event loop's
    default executor, which the embedder and the database need meanwhile.
    """

    llama: LlamaLike
    lock: threading.Lock = field(default_factory=threading.Lock)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="beads-local-model")
    )


_engines: dict[tuple[Path, str, int, int], Engine] = {}
_engines_lock = threading.Lock()


def engine_key(settings: ModelSettings) -> tuple[Path, str, int, int]:
    """What makes two settings share one loaded model: the same file, context size and threads."""
    return (settings.model_cache_dir, settings.local_model, settings.local_num_ctx, settings.local_threads)


def shared_engine(settings: ModelSettings) -> Engine:
    """The process's model for these settings, loaded (and its weights assembled) on first use."""
    key = engine_key(settings)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            path = ensure_weights(settings.model_cache_dir, LOCAL_MODELS[settings.local_model])
            engine = Engine(_load_llama(path, settings))
            if not _engines:
                atexit.register(_close_engines)
            _engines[key] = engine
        return engine


def _close_engines() -> None:
    # Freed here, while the interpreter is whole: left to Llama.__del__ at shutdown, the native
    # handles are released after llama_cpp's module globals are gone, which prints a TypeError.
    with _engines_lock:
        for engine in _engines.values():
            if engine.lock.acquire(timeout=5):
                try:
                    close = getattr(engine.llama, "close", None)
                    if close is not None:
                        close()
                finally:
                    engine.lock.release()
        _engines.clear()


@functools.cache  # once per process
def _register_null_files_cleanup() -> None:
    atexit.register(_close_null_files)


def _close_null_files() -> None:
    # llama_cpp opens two /dev/null files at import (to silence the native log) and never closes
    # them, which shows up as a ResourceWarning at exit. Registered at import, before any engine's
    # cleanup, so it runs after them: closing a model still writes to these files.
    utils = sys.modules.get("llama_cpp._utils")
    for name in ("outnull_file", "errnull_file"):
        handle = getattr(utils, name, None)
        if handle is not None:
            handle.close()


def require_local(settings: ModelSettings) -> None:
    """Refuse now, naming the chosen model's extra (`local`, or `local15` for the 1.5B), when the
    offline model could not load later: llama-cpp-python missing, or the weights neither joined in
    the cache nor installed to join. Imports nothing (loading stays on first use)."""
    spec = LOCAL_MODELS[settings.local_model]
    needed: tuple[str, ...] = ("llama_cpp",)
    if not weights_ready(settings.model_cache_dir, spec):
        needed += (*spec.part_modules, "fasteners")
    what = "the offline chat model"
    if settings.local_model != DEFAULT_LOCAL_MODEL:  # a model asked for by name: say which, and where
        what += f" {settings.local_model} (BEADS_LOCAL_MODEL)"
    require_extra(spec.extra, needed, what)


def import_llama_cpp() -> ModuleType:
    """``llama_cpp``, imported the way every part of this package must first import it."""
    # llama.cpp's OpenMP threads spin while they wait for work. On a small machine that also runs
    # Postgres and the embedder, spinning threads fight the others for the cores, and passive waiting
    # generated several times faster on 2 busy cores (docs/guide/models.md). Read once, when the OpenMP runtime starts, so
    # it must be set before llama_cpp is first imported; an explicit setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        llama_cpp = import_extra("llama_cpp", "local", "the offline chat model")
    except MissingExtraError:
        raise
    except ImportError as e:  # a broken build of the native extension
        raise ModelUnavailableError(f"llama-cpp-python cannot be imported: {e}") from e
    _register_null_files_cleanup()
    return llama_cpp


def _cpu_reports_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and " amx_tile" in line for line in f)
    except OSError:
        return False


_default_params_lock = threading.Lock()


def _load_llama(path: Path, settings: ModelSettings) -> LlamaLike:
    llama_cpp = import_llama_cpp()
    Llama = llama_cpp.Llama
    try:
        if not _cpu_reports_amx():
            llama: LlamaLike = Llama(
                model_path=str(path),
                n_ctx=settings.local_num_ctx,
                n_threads=settings.local_threads,
                verbose=False,
            )
            return llama
        # On a CPU that reports AMX (seen in a VM), llama.cpp's extra weight buffers (repacked and
        # AMX kernels) crash in decode on any prompt longer than a few tokens. `Llama` does not expose
        # the model parameter that turns them off, so its defaults are wrapped for this one load.
        native = llama_cpp.llama_cpp
        with _default_params_lock:
            defaults = native.llama_model_default_params

            def without_extra_buffers() -> Any:
                params = defaults()
                params.use_extra_bufts = False
                return params

            native.llama_model_default_params = without_extra_buffers
            try:
                llama = Llama(
                    model_path=str(path),
                    n_ctx=settings.local_num_ctx,
                    n_threads=settings.local_threads,
                    verbose=False,
                )
            finally:
                native.llama_model_default_params = defaults
    except (ValueError, RuntimeError) as e:
        raise ModelUnavailableError(f"llama.cpp could not load {path}: {e}") from e
    return llama
