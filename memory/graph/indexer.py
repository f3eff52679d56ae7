"""The background indexer: moves freshly written vectors into the HNSW indexes, off the write path.

A capture commits its vectors with `indexed = false` (migration 0006) and returns; search compares
such rows exactly, so nothing waits for the index. Each write pokes this indexer, whose one daemon
thread drains the pending rows in small batches on its own pooled connection. It exits after a
quiet spell and the next poke starts it again, so an idle store holds no thread and no connection.

Several processes may each run one: `index_pending` skips rows another indexer holds.
"""

from __future__ import annotations

import logging
import threading

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool, PoolClosed

from memory.postgres import vectors

_log = logging.getLogger(__name__)

IDLE_EXIT_SECONDS = 10.0


class BackgroundIndexer:
    def __init__(self, pool: ConnectionPool[psycopg.Connection[DictRow]], batch: int = 128) -> None:
        self._pool = pool
        self._batch = batch
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def poke(self) -> None:
        """There are new vectors: index them soon (never blocks the caller)."""
        with self._lock:
            self._wake.set()
            if self._thread is None:
                self._stopping = False
                self._thread = threading.Thread(target=self._run, name="beads-indexer", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Stop the background thread, if one runs (pending vectors stay pending: search finds them,
        and the next write's indexer takes them)."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stopping = thread is not None
            self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def drain(self, conn: psycopg.Connection[DictRow] | None = None) -> int:
        """Index every pending vector now, in the caller's thread, on `conn` if given (a caller that
        holds one takes no second from the pool); returns how many."""
        if conn is not None:
            return _drain(conn, self._batch)
        with self._pool.connection() as own:
            return _drain(own, self._batch)

    def _run(self) -> None:
        while True:
            if self._stopping:
                return
            if not self._wake.wait(IDLE_EXIT_SECONDS):
                with self._lock:
                    if not self._wake.is_set():  # a poke may have landed between the wait and here
                        self._thread = None
                        return
            self._wake.clear()
            try:
                self.drain()
            except PoolClosed:
                with self._lock:
                    self._thread = None
                return
            except Exception:
                # the rows stay pending (search still finds them) and the next poke retries
                _log.warning("background indexing failed; will retry on the next write", exc_info=True)


def _drain(conn: psycopg.Connection[DictRow], batch: int) -> int:
    total = 0
    while moved := vectors.index_pending(conn, batch):
        total += moved
    return total
