"""The project's Dagster storage: Dagster's SQLite storage, with the event log's databases kept open.

Dagster's ``SqliteEventLogStorage`` creates and disposes a SQLAlchemy engine for every group of
statements: each event a run stores costs two fresh SQLite connections (the run's database and
the cross-run index) and two statement compilations, since a new engine starts with an empty
statement cache. A first ``codemem index`` records four materializations per bucket, ~600 events
for 250 files, and the recorder spent ~15 ms on each, longer than the index itself took.

``ReusingSqliteEventLogStorage`` keeps the engine of the index database and of the last few run
databases (``KEEP_RUN_ENGINES``) instead, each with one pooled connection; everything else, and
the files on disk, are Dagster's. ``CodememSqliteStorage`` is ``DagsterSqliteStorage`` with that
event log; the project's ``dagster.yaml`` names it (``pipelines.dagster.run.dagster_yaml``), so the
UI, the daemon and the recorder all use it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    _event_logs_directory,
)
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine

KEEP_RUN_ENGINES = 4
"""Run databases whose engines stay open (the least recently used closes first); the index
database's stays open as long as the storage."""


class ReusingSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` that reuses one engine (one connection) per database."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._engines_lock = threading.Lock()
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> ReusingSqliteEventLogStorage:  # type: ignore[override]
        """The storage a ``dagster.yaml`` entry describes."""
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        """The open engine of ``shard``'s database (created, and its schema ensured, on first use)."""
        with self._engines_lock:
            engine = self._engines.get(shard)
            if engine is not None:
                self._engines.move_to_end(shard)
                return engine
            engine = create_engine(self.conn_string_for_shard(shard), pool_size=1, max_overflow=4,
                                   connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            self._engines[shard] = engine
            runs = [name for name in self._engines if name != INDEX_SHARD_NAME]
            for name in runs[:-KEEP_RUN_ENGINES] if len(runs) > KEEP_RUN_ENGINES else []:
                self._engines.pop(name).dispose()
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:  # type: ignore[override]
        """A connection to ``shard``'s database inside a transaction, as Dagster's own gives."""
        with self._db_lock:
            engine = self._engine(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _close_engines(self) -> None:
        with self._engines_lock:
            engines, self._engines = list(self._engines.values()), OrderedDict()
        for engine in engines:
            engine.dispose()

    def wipe(self) -> None:
        """Dagster's wipe (it deletes the run databases), their engines closed first."""
        with self._db_lock:
            self._close_engines()
        super().wipe()

    def dispose(self) -> None:
        """Close the engines, then Dagster's own disposal (its file watchers)."""
        self._close_engines()
        super().dispose()


class CodememSqliteStorage(DagsterSqliteStorage):
    """Dagster's SQLite storage (runs, events, schedules under ``base_dir``) with
    ``ReusingSqliteEventLogStorage`` as its event log."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        super().__init__(base_dir, inst_data=inst_data)
        self._event_log_storage = ReusingSqliteEventLogStorage(_event_logs_directory(base_dir))

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> CodememSqliteStorage:  # type: ignore[override]
        """The storage a ``dagster.yaml`` ``storage: custom:`` entry describes."""
        return cls.from_local(inst_data=inst_data, **config_value)
