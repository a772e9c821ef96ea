"""The ledger's bulk rewrites, each one transaction: a normalization (merges and cleanup), a
replica's refresh from another ledger, and the adoption of versions written elsewhere (git notes)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace

from resources.faults import fault_point
from resources.memory.ledger_connection import LedgerConnection
from resources.memory.ledger_model import (
    ANCHOR_COLUMNS,
    AUDIT_COLUMNS,
    COLUMNS,
    RELATIONSHIP_COLUMNS,
    Merge,
    MemoryRow,
    Relationship,
    content_hash,
    now_iso,
    placeholders,
    without_nul,
)
from resources.sqlite import read_meta, write_meta

UNLINK = "unlink"
"""The audit operation of a relationship removed as orphaned; ``previous`` holds the relationship."""
RELINK = "relink"
"""The audit operation of a removed relationship put back from the audit (``restore_links``)."""
EPOCH_KEY = "ledger_epoch"
"""Ledger meta: changes each time every row of the ledger is replaced (``load_from``)."""
FOLLOWED_EPOCH_KEY = "followed_epoch"
"""Meta of a copy (``follow``): the source's ``ledger_epoch`` it copies."""
_ANCHOR_SIGNATURE = "SELECT count(*), max(checked_at), CAST(coalesce(sum(stale), 0) AS INTEGER) FROM anchor_state"
_EVERY_COLUMN = ", ".join(f"{name.strip()}=excluded.{name.strip()}" for name in COLUMNS.split(",")[1:])


def relationship_snapshot(rel: Relationship) -> dict[str, object]:
    """A relationship as the audit records it (enough to put it back)."""
    return {
        "source_id": rel.source_id, "type": rel.rel_type, "target_id": rel.target_id,
        "target_kind": rel.target_kind, "properties": rel.properties, "created_at": rel.created_at,
    }


class LedgerBulkWrites(LedgerConnection):
    """Writes that rewrite many memories at once."""

    def replicate(
        self, rows: Sequence[MemoryRow], relationships: dict[str, Sequence[Relationship]], gone: Sequence[str]
    ) -> int:
        """Make this ledger a replica of another's rows, in one transaction: ``rows`` are stored as
        they are (same id, version and times; their outgoing relationships replaced by
        ``relationships[id]``), ``gone`` ids are removed, and every one is queued for projection.
        Not audited: a replica is derived data (the source ledger keeps the audit).

        Returns:
            How many memories were queued.
        """
        with self._transaction() as conn:
            at = now_iso()
            for row in rows:
                conn.execute(
                    f"INSERT INTO memories({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,'pending') "
                    f"ON CONFLICT(id) DO UPDATE SET {_EVERY_COLUMN}",
                    (
                        row.id, row.memory_type, row.content, json.dumps(row.metadata), row.content_hash,
                        row.importance_score, row.access_count, row.last_accessed_at, row.version, row.created_at,
                        row.updated_at, int(row.deleted), row.deleted_at,
                    ),
                )
                conn.execute("DELETE FROM relationships WHERE source_id=?", (row.id,))
                for rel in relationships.get(row.id, ()):
                    self._put_relationship(conn, row.id, rel, at)
                self._enqueue(conn, row.id, at)
            for memory_id in gone:
                conn.execute("DELETE FROM memories WHERE id=?", (memory_id,))
                conn.execute("DELETE FROM relationships WHERE source_id=?", (memory_id,))
                self._enqueue(conn, memory_id, at)
            return len(rows) + len(gone)

    def follow(self, source: LedgerConnection, *, batch: int = 1000) -> int | None:
        """Make this ledger a copy of ``source`` as far as its audit goes: the audit entries after
        this copy's last, verbatim (same sequence numbers), the memories they name and those
        memories' outgoing relationships, and the anchor states when they changed. Each batch is one
        transaction. A source replaced since the last call (a restore: its ``ledger_epoch`` changed,
        or its audit is behind this copy) is not followed: the caller makes a new copy (``None``).

        What it is for: in server mode the project's ledger is in PostgreSQL, and the hooks (stdlib
        only, no database driver) read this SQLite copy (``query_server.memory.stores``).

        Returns:
            How many audit entries were copied; None when this copy must be made anew.
        """
        epoch = source.meta(EPOCH_KEY) or ""
        with source._reading() as src:
            top = int(src.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()[0])
            anchors = src.execute(_ANCHOR_SIGNATURE).fetchone()
        with self._reading() as conn:
            seen = int(conn.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()[0])
            copied_anchors = conn.execute(_ANCHOR_SIGNATURE).fetchone()
        followed = self.meta(FOLLOWED_EPOCH_KEY)
        if followed is None and seen == 0:  # a new copy: it follows this source from now on
            self.set_meta(FOLLOWED_EPOCH_KEY, epoch)
        elif top < seen or epoch != (followed or ""):  # the source was replaced since
            return None
        copied = 0
        while True:
            with source._reading() as src:
                entries = src.execute(
                    f"SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > ? ORDER BY seq LIMIT ?", (seen, batch)
                ).fetchall()
                ids = list(dict.fromkeys(entry[1] for entry in entries))
                marks = ",".join("?" * len(ids))
                rows = src.execute(f"SELECT {COLUMNS} FROM memories WHERE id IN ({marks})", ids).fetchall() if ids else []
                links = src.execute(
                    f"SELECT {RELATIONSHIP_COLUMNS} FROM relationships WHERE source_id IN ({marks})", ids
                ).fetchall() if ids else []
                replaced = (read_meta(src, EPOCH_KEY) or "") != epoch  # read last: a restore before any read shows
            if replaced:
                return None
            if not entries:
                break
            present = {row[0] for row in rows}
            with self._transaction(durable=False) as conn:  # a copy: rebuilt if lost
                now = int(conn.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()[0])
                if now != seen:  # another process following the same copy got here first: read on from there
                    seen = now
                    continue
                conn.executemany(f"INSERT INTO audit({AUDIT_COLUMNS}) VALUES ({placeholders(AUDIT_COLUMNS)})", entries)
                conn.executemany("DELETE FROM memories WHERE id=?", [(i,) for i in ids])
                conn.executemany("DELETE FROM relationships WHERE source_id=?", [(i,) for i in ids])
                conn.executemany(  # a memory gone for good takes the links to it along (as in the source)
                    "DELETE FROM relationships WHERE target_id=?", [(i,) for i in ids if i not in present]
                )
                conn.executemany(f"INSERT INTO memories({COLUMNS}) VALUES ({placeholders(COLUMNS)})", rows)
                conn.executemany(f"INSERT INTO relationships({RELATIONSHIP_COLUMNS}) VALUES ({placeholders(RELATIONSHIP_COLUMNS)})", links)
            copied += len(entries)
            seen = int(entries[-1][0])
        if tuple(anchors) != tuple(copied_anchors or ()):
            with source._reading() as src:
                states = src.execute(f"SELECT {ANCHOR_COLUMNS} FROM anchor_state").fetchall()
                if (read_meta(src, EPOCH_KEY) or "") != epoch:
                    return None
            with self._transaction(durable=False) as conn:  # a copy: rebuilt if lost
                conn.execute("DELETE FROM anchor_state")
                conn.executemany(f"INSERT INTO anchor_state({ANCHOR_COLUMNS}) VALUES ({placeholders(ANCHOR_COLUMNS)})", states)
        return copied

    def adopt(
        self, rows: Sequence[MemoryRow], relationships: dict[str, Sequence[Relationship]], *, operation: str = "notes_import",
    ) -> list[str]:
        """Take versions of memories written in another clone (read from git notes) as they are — id,
        version, times, deleted flag — in one transaction, each audited with the version it replaces
        (so nothing is lost) and queued for projection; their relationships are added to the ones
        kept here. A memory whose version here is as new or newer is left as it is.

        Returns:
            The ids created or replaced.
        """
        adopted: list[str] = []
        with self._transaction() as conn:
            at = now_iso()
            for row in rows:
                before = self._fetch(conn, row.id)
                if before is not None and (before.version, before.updated_at) >= (row.version, row.updated_at):
                    continue
                row = replace(row, content=without_nul(row.content), metadata=without_nul(row.metadata))  # noqa: PLW2901
                conn.execute(
                    f"INSERT INTO memories({COLUMNS}) VALUES (?,?,?,?,?,?,0,NULL,?,?,?,?,?,'pending') ON CONFLICT(id) DO UPDATE SET "
                    "memory_type=excluded.memory_type, content=excluded.content, metadata=excluded.metadata, "
                    "content_hash=excluded.content_hash, importance_score=excluded.importance_score, version=excluded.version, "
                    "created_at=excluded.created_at, updated_at=excluded.updated_at, deleted=excluded.deleted, "
                    "deleted_at=excluded.deleted_at",
                    (
                        row.id, row.memory_type, row.content, json.dumps(row.metadata), content_hash(row.content),
                        row.importance_score, row.version, row.created_at, row.updated_at, int(row.deleted), row.deleted_at,
                    ),
                )
                for rel in relationships.get(row.id, ()):
                    self._put_relationship(conn, row.id, rel, at)
                after = self._fetch(conn, row.id)
                assert after is not None
                self._audit(conn, row.id, operation, before.snapshot() if before else None, after.snapshot(), at, None)
                self._enqueue(conn, row.id, at)
                adopted.append(row.id)
        return adopted

    def apply_normalization(
        self,
        merges: Sequence[Merge],
        cleanup_ids: Sequence[str],
        *,
        meta: dict[str, str],
        requeue: Iterable[str] = (),
        request_id: str | None = None,
        orphan_links: Sequence[Relationship] = (),
    ) -> dict[str, int]:
        """Apply a normalization in ONE transaction: merge duplicates into their keepers
        (metadata merged, relationships re-pointed, the others soft-deleted as ``merged_into``),
        hard-delete expired soft-deletes, remove ``orphan_links`` (each audited as ``unlink`` with
        the relationship as its previous value: ``restore_links(request_id)`` puts them back), set
        ``meta`` (the new projection generation) and queue every touched memory for projection. A
        crash anywhere leaves the ledger as it was.

        Returns:
            Counts of merged, cleaned, unlinked (orphaned relationships removed) and queued memories.
        """
        merged = cleaned = unlinked = 0
        with self._transaction() as conn:
            at = now_iso()
            touched: set[str] = set(requeue)
            for merge in merges:
                keeper = self._fetch(conn, merge.keeper_id)
                if keeper is None or keeper.deleted:
                    continue
                dropped = [r for r in (self._fetch(conn, d) for d in merge.dropped_ids) if r is not None and not r.deleted]
                if not dropped:
                    continue
                conn.execute(
                    "UPDATE memories SET metadata=?, importance_score=?, access_count=access_count+?, "
                    "version=version+1, updated_at=? WHERE id=?",
                    (
                        json.dumps(merge.metadata),
                        max([keeper.importance_score, *(r.importance_score for r in dropped)]),
                        sum(r.access_count for r in dropped),
                        at,
                        keeper.id,
                    ),
                )
                after = self._fetch(conn, keeper.id)
                assert after is not None
                current = {**after.snapshot(), "merged_from": [r.id for r in dropped]}
                self._audit(conn, keeper.id, "merge", keeper.snapshot(), current, at, request_id)
                for row in dropped:
                    for column in ("source_id", "target_id"):
                        other = "target_id" if column == "source_id" else "source_id"
                        conn.execute(  # each link re-pointed unless the keeper has it already (then dropped below)
                            f"UPDATE relationships SET {column}=? WHERE {column}=? AND NOT EXISTS (SELECT 1 FROM "
                            f"relationships AS kept WHERE kept.{column}=? AND kept.rel_type=relationships.rel_type "
                            f"AND kept.{other}=relationships.{other})",
                            (keeper.id, row.id, keeper.id),
                        )
                    conn.execute("DELETE FROM relationships WHERE source_id=? OR target_id=?", (row.id, row.id))
                    conn.execute("DELETE FROM relationships WHERE source_id=target_id")
                    conn.execute(
                        "UPDATE memories SET deleted=1, deleted_at=?, version=version+1, updated_at=? WHERE id=?",
                        (at, at, row.id),
                    )
                    gone = self._fetch(conn, row.id)
                    assert gone is not None
                    self._audit(
                        conn, row.id, "merged_into", row.snapshot(), {**gone.snapshot(), "merged_into": keeper.id}, at,
                        request_id,
                    )
                    touched.add(row.id)
                    merged += 1
                touched.add(keeper.id)
            for memory_id in cleanup_ids:
                row = self._fetch(conn, memory_id)
                if row is None or not row.deleted:
                    continue
                conn.execute("DELETE FROM memories WHERE id=?", (memory_id,))
                conn.execute("DELETE FROM relationships WHERE source_id=? OR target_id=?", (memory_id, memory_id))
                self._audit(conn, memory_id, "cleanup", row.snapshot(), None, at, request_id)
                touched.add(memory_id)
                cleaned += 1
            for rel in orphan_links:
                if unlinked:
                    fault_point("normalize:orphan_removal")  # after the first removal: a crash must undo it too
                removed = conn.execute(
                    "DELETE FROM relationships WHERE source_id=? AND rel_type=? AND target_id=?",
                    (rel.source_id, rel.rel_type, rel.target_id),
                ).rowcount
                if not removed:
                    continue  # re-pointed by a merge above, or gone with its memory
                self._audit(conn, rel.source_id, UNLINK, {"relationship": relationship_snapshot(rel)}, None, at, request_id)
                if self._fetch(conn, rel.source_id) is not None:
                    touched.add(rel.source_id)
                unlinked += 1
            for key, value in meta.items():
                write_meta(conn, key, value)
            for memory_id in touched:
                self._enqueue(conn, memory_id, at)
        return {"merged": merged, "cleaned": cleaned, "unlinked": unlinked, "queued": len(touched)}

    def restore_links(self, request_id: str, *, restore_request_id: str | None = None) -> int:
        """Put back, in one transaction, the relationships the write with ``request_id`` removed as
        orphaned (its ``unlink`` audit entries); each is audited as ``relink``. Ones already back
        are skipped, so running it twice restores once.

        Returns:
            How many relationships were put back.
        """
        restored = 0
        with self._transaction() as conn:
            at = now_iso()
            entries = conn.execute(
                "SELECT memory_id, previous FROM audit WHERE request_id=? AND operation=? ORDER BY seq",
                (request_id, UNLINK),
            ).fetchall()
            for memory_id, previous in entries:
                rel = json.loads(previous)["relationship"]
                added = conn.execute(
                    f"INSERT INTO relationships({RELATIONSHIP_COLUMNS}) VALUES ({placeholders(RELATIONSHIP_COLUMNS)}) "
                    "ON CONFLICT DO NOTHING",
                    (rel["source_id"], rel["type"], rel["target_id"], rel["target_kind"], json.dumps(rel["properties"]),
                     rel["created_at"] or at),
                ).rowcount
                if not added:
                    continue
                self._audit(conn, memory_id, RELINK, None, {"relationship": rel}, at, restore_request_id or f"relink:{request_id}")
                if self._fetch(conn, memory_id) is not None:
                    self._enqueue(conn, memory_id, at)
                restored += 1
        return restored
