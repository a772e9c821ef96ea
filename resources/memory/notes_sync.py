"""Git notes as a live store: the project ledger and the ``refs/notes/cs/<namespace>`` notes kept in step.

The ledger stays the system of record; the notes are the form memories travel in between clones.
A project memory whose metadata names a commit (``commit_sha``, ``commit`` or ``git_commit``) and whose
type has a namespace (``resources.schemas.memory.notes``) lives in the note of that commit in its
namespace's ref; the memories of one commit share its note (``render_note``).

One sync (``NotesSync.run``) goes three steps:

1. **merge** what ``git fetch`` brought into ``refs/notes/remotes/<remote>/cs/*`` into the local refs
   (``resources.memory.notes_merge``: a union, never a lost note);
2. **import** the notes of every local namespace ref whose tip changed since the last import: a memory
   the ledger does not have is created, an older ledger version is replaced by the note's, both
   audited (``Ledger.adopt``); a memory hard-deleted here is not brought back;
3. **export** what the ledger changed since the last export — the audit entries after a watermark kept
   in the ledger's meta table — into the notes (compare-and-swap writes, retried when another writer
   moved the ref). The watermark moves only after the notes are written: a crash or a failed ``git``
   between a ledger write and its note loses nothing, the next export writes it. A memory that cannot
   be written (its commit is not in this clone) is kept in a retry list and tried at every export.

A deleted memory stays in its note as a tombstone (``deleted: true``; without its content once it is
hard-deleted) so that merging another clone's older note cannot bring it back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from resources.faults import fault_point
from resources.graph.cypher import ALL_EDGE_TYPES
from resources.memory.git_notes import latest_records, record_rank
from resources.memory.git_repo import GitRepo, NotesRefMoved
from resources.memory.ledger import (
    Ledger,
    MemoryRow,
    Relationship,
    content_hash,
    now_iso,
)
from resources.memory.markdown import MarkdownMemoryError, parse_note, render_note
from resources.memory.notes_merge import MAX_ATTEMPTS, merge_fetched_ref, merge_records
from resources.schemas.memory.kinds import MemoryValidationError
from resources.schemas.memory.metadata import validate_metadata
from resources.schemas.memory.notes import (
    NAMESPACE_KEY,
    NAMESPACES,
    NOTES_PREFIX,
    PRIMARY_NAMESPACE,
    Namespace,
    named_commit,
    namespace_of,
)

META_SEQ = "git_notes_audit_seq"
"""The ledger meta key of the export watermark: the last audit entry written to the notes."""
META_RETRY = "git_notes_retry"
"""Memory ids whose note could not be written yet (JSON list), tried again at every export."""
META_TIPS = "git_notes_imported"
"""Notes ref -> the tip last imported (JSON), so an unchanged ref is not read again."""
REMOTE_NOTES = "refs/notes/remotes/"
"""Where the configured fetch refspec puts other clones' notes: ``refs/notes/remotes/<remote>/cs/<ns>``."""
AUDIT_BATCH = 5_000
FEW_NOTES = 8
"""Up to this many notes of a ref to change, each is read on its own (else the whole ref at once).
Read after the tip: when the ref moved in between, the compare-and-swap refuses and the write is redone."""
_REMOVE = None

Target = tuple[str, str]
"""(notes ref, commit SHA): where a memory's note is."""


@dataclass
class SyncReport:
    """What a sync did (``NotesSyncResult`` carries it to the tools)."""

    merged_refs: list[str] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    notes_written: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed_ids(self) -> list[str]:
        """The ledger memories the sync created or replaced (to project)."""
        return [*self.imported, *self.updated]


def note_record(row: MemoryRow, relationships: Iterable[Relationship]) -> dict[str, Any]:
    """A ledger memory as its note holds it (``render_memory``'s record)."""
    return {
        **row.snapshot(),
        "relationships": [
            {"type": r.rel_type, "target_id": r.target_id, "target_kind": r.target_kind, "properties": r.properties}
            for r in relationships
        ],
    }


def same_memory(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when two versions of a memory say the same (versions and times aside)."""
    def key(record: Mapping[str, Any]) -> tuple[Any, ...]:
        rels = sorted((str(r.get("type")), str(r.get("target_id")), json.dumps(r.get("properties") or {}, sort_keys=True))
                      for r in record.get("relationships") or [])
        return (record.get("memory_type"), record.get("content") or "", json.dumps(record.get("metadata") or {}, sort_keys=True),
                float(record.get("importance_score") or 0.5), bool(record.get("deleted")), rels)

    return key(a) == key(b)


class NotesSync:
    """The ledger of the project scope and the notes of the git repository that holds the project."""

    def __init__(self, ledger: Ledger, repo: GitRepo) -> None:
        """Sync ``ledger`` with the ``refs/notes/cs/*`` notes of ``repo``."""
        self.ledger = ledger
        self.repo = repo
        self._commits: dict[str, str | None] = {}
        self._reexport: set[str] = set()
        self._imported_tips: dict[str, str] | None = None

    # -- the whole sync ------------------------------------------------------------------------------
    def run(self, *, rebuild: bool = False) -> SyncReport:
        """Merge fetched notes, import the notes, export the ledger's changes (see the module)."""
        report = SyncReport()
        self.repo.drop_stale_temps()
        self.merge_fetched(report)
        self.import_notes(report, rebuild=rebuild)
        self.export(report, rebuild=rebuild)
        return report

    # -- 1. merge --------------------------------------------------------------------------------------
    def merge_fetched(self, report: SyncReport) -> None:
        """Merge every fetched ``refs/notes/remotes/<remote>/cs/<ns>`` into ``refs/notes/cs/<ns>``."""
        for fetched, tip in sorted(self.repo.refs(REMOTE_NOTES).items()):
            _, _, rest = fetched.removeprefix(REMOTE_NOTES).partition("/")
            if not rest.startswith("cs/"):
                continue
            name = rest.removeprefix("cs/")
            if name not in NAMESPACES:
                report.errors.append({"note": fetched, "error": _unknown_namespace(name)})
                continue
            if merge_fetched_ref(self.repo, NOTES_PREFIX + name, tip):
                report.merged_refs.append(NOTES_PREFIX + name)

    # -- 2. import -------------------------------------------------------------------------------------
    def local_refs(self, report: SyncReport | None = None) -> dict[str, str]:
        """The namespace refs of this clone and their tips (an unknown namespace is reported)."""
        tips: dict[str, str] = {}
        for ref, tip in self.repo.refs(NOTES_PREFIX).items():
            name = ref.removeprefix(NOTES_PREFIX)
            if name in NAMESPACES:
                tips[ref] = tip
            elif report is not None:
                report.errors.append({"note": ref, "error": _unknown_namespace(name)})
        return tips

    def import_notes(self, report: SyncReport, *, rebuild: bool = False) -> None:
        """Bring what the notes hold and the ledger does not (or holds older) into the ledger."""
        tips = self.local_refs(report)
        seen = json.loads(self.ledger.meta(META_TIPS) or "{}")
        changed = {ref: tip for ref, tip in tips.items() if rebuild or seen.get(ref) != tip}
        self._imported_tips = {ref: tip for ref, tip in tips.items() if ref not in changed and seen.get(ref) == tip}
        if not changed:
            return
        found: dict[str, tuple[Namespace, str, dict[str, Any]]] = {}
        for ref, tip in sorted(changed.items()):
            namespace = NAMESPACES[ref.removeprefix(NOTES_PREFIX)]
            for commit, item in latest_records(self.repo.notes_at(tip)):
                where = f"{ref}:{commit[:12]}"
                if isinstance(item, MarkdownMemoryError):
                    report.errors.append({"note": where, "error": f"not a codemem note ({item}) — left as it is; codemem reads only the notes it writes"})
                elif not _is_uuid(item.get("id")):
                    report.errors.append({"note": where, "error": f"a memory without a valid id ({item.get('id')!r}) — left in the note, not imported"})
                elif item["id"] not in found or record_rank(item) > record_rank(found[item["id"]][2]):
                    found[str(item["id"])] = (namespace, commit, item)
        rows = self.ledger.get_many(list(found))
        adopt: list[MemoryRow] = []
        links: dict[str, list[Relationship]] = {}
        for memory_id, (namespace, commit, record) in found.items():
            row = rows.get(memory_id)
            try:
                new = self._adoptable(namespace, commit, record, row)
            except (MemoryValidationError, ValueError, TypeError) as exc:
                report.errors.append({"memory_id": memory_id, "note": f"{namespace.ref}:{commit[:12]}", "error": f"{exc} — left in the note, not imported"})
                continue
            if new is None:
                continue
            adopt.append(new)
            links[memory_id] = self._links(record, memory_id, found, report)
        adopted = set(self.ledger.adopt(adopt, links))
        report.imported += [r.id for r in adopt if r.id in adopted and r.id not in rows]
        report.updated += [r.id for r in adopt if r.id in adopted and r.id in rows]
        self._imported_tips.update(changed)
        self.ledger.set_meta(META_TIPS, json.dumps(self._imported_tips, sort_keys=True))

    def _adoptable(self, namespace: Namespace, commit: str, record: dict[str, Any], row: MemoryRow | None) -> MemoryRow | None:
        """The ledger row a note's memory becomes, or None when the ledger needs nothing from it."""
        memory_type = str(record.get("memory_type"))
        if memory_type != namespace.memory_type:
            raise ValueError(f"a {memory_type} memory in namespace {namespace.name}, which holds {namespace.memory_type} memories")
        memory_id = str(record["id"])
        deleted = bool(record.get("deleted"))
        if row is None:
            if deleted or self.ledger.audit_of(memory_id):  # never here, or hard-deleted here: its tombstone goes out
                if not deleted:
                    self._reexport.add(memory_id)
                return None
        else:
            mine = note_record(row, self.ledger.relationships_of(row.id)[0])
            if same_memory(mine, record):
                return None
            if record_rank(record) <= (row.version, row.updated_at):
                self._reexport.add(memory_id)  # the ledger's is newer: the export writes it over the note's
                return None
        metadata = dict(record.get("metadata") or {})
        if named_commit(metadata) is None:
            metadata["commit_sha"] = commit
        if namespace.name != PRIMARY_NAMESPACE.get(memory_type) and NAMESPACE_KEY not in metadata:
            metadata[NAMESPACE_KEY] = namespace.name
        content = str(record.get("content") or "") if not deleted or row is None else row.content
        if not deleted:
            metadata = validate_metadata(memory_type, metadata, content=content, strict_role=False)
        created = str(record.get("created_at") or now_iso())
        importance = record.get("importance_score", 0.5)
        if isinstance(importance, bool) or not isinstance(importance, int | float) or not 0 <= importance <= 1:
            raise ValueError(f"importance_score must be a number from 0 to 1 (got {importance!r})")
        return MemoryRow(
            id=str(record["id"]), memory_type=memory_type, content=content,
            metadata=metadata, content_hash=content_hash(content), importance_score=float(importance), access_count=0,
            last_accessed_at=None, version=int(record.get("version") or 1), created_at=created,
            updated_at=str(record.get("updated_at") or created), deleted=deleted,
            deleted_at=record.get("deleted_at") if deleted else None, sync_status="pending",
        )

    def _links(self, record: Mapping[str, Any], memory_id: str, found: Mapping[str, Any], report: SyncReport) -> list[Relationship]:
        """A note memory's relationships; a link to a memory deleted here is kept and reported."""
        links = []
        for rel in record.get("relationships") or []:
            if rel.get("type") not in ALL_EDGE_TYPES or not rel.get("target_id"):
                continue
            target = str(rel["target_id"])
            kind = str(rel.get("target_kind") or "memory")
            links.append(Relationship(memory_id, str(rel["type"]), target, kind, rel.get("properties") or {}))
            if kind.startswith("memory") and target not in found:
                held = self.ledger.get(target)
                if held is not None and held.deleted:
                    report.errors.append({"memory_id": memory_id, "error": (
                        f"links ({rel['type']}) to memory {target}, which is deleted here — the link is kept; restore that "
                        "memory, or remove the link")})
        return links

    # -- 3. export -------------------------------------------------------------------------------------
    def export(self, report: SyncReport, *, rebuild: bool = False) -> None:
        """Write the ledger's changes since the watermark (and the memories to retry) into the notes.

        Raises:
            GitNotesError: git failed; the watermark stays, the next export writes it all.
        """
        if self._imported_tips is None:
            self._imported_tips = json.loads(self.ledger.meta(META_TIPS) or "{}")
        start = int(self.ledger.meta(META_SEQ) or 0)
        retry = set(json.loads(self.ledger.meta(META_RETRY) or "[]"))
        entries = self.ledger.audit_after(start, AUDIT_BATCH)
        last = entries[-1][0] if entries else start
        earlier: dict[str, list[dict[str, Any]]] = {}
        for _, memory_id, previous in entries:
            earlier.setdefault(memory_id, [])
            if previous and "memory_type" in previous:
                earlier[memory_id].append(previous)
        ids = set(earlier) | retry | self._reexport
        placed: dict[str, set[Target]] = {}
        if rebuild:
            ids |= {row.id for row in self.ledger.iter_memories(memory_types=list(PRIMARY_NAMESPACE))}
            for ref, tip in self.local_refs().items():
                for commit, text in self.repo.notes_at(tip).items():
                    try:
                        for record in parse_note(text):
                            if _is_uuid(record.get("id")):
                                placed.setdefault(str(record["id"]), set()).add((ref, commit))
                                ids.add(str(record["id"]))
                    except MarkdownMemoryError:
                        continue
        if not ids:
            return
        rows = self.ledger.get_many(sorted(ids))
        plan: dict[str, dict[str, dict[str, dict[str, Any] | None]]] = {}
        failed: dict[str, str] = {}
        for memory_id in sorted(ids):
            olds = {t for t in (self._target_of(s)[0] for s in earlier.get(memory_id, [])) if t is not None}
            olds |= placed.get(memory_id, set())
            row = rows.get(memory_id)
            if row is None:
                self._tombstone(memory_id, olds, plan)
                continue
            target, error = self._target_of(row.snapshot())
            if error:
                failed[memory_id] = error
            if target is not None:
                plan.setdefault(target[0], {}).setdefault(target[1], {})[memory_id] = note_record(row, self.ledger.relationships_of(row.id)[0])
            for ref, commit in olds - {target} if target else olds:
                plan.setdefault(ref, {}).setdefault(commit, {}).setdefault(memory_id, _REMOVE)
        for ref, commits in sorted(plan.items()):
            self._write_ref(ref, commits, report, failed)
        self.ledger.set_meta(META_RETRY, json.dumps(sorted(failed)))
        self.ledger.set_meta(META_SEQ, str(last))
        self.ledger.set_meta(META_TIPS, json.dumps(self._imported_tips, sort_keys=True))
        report.errors += [{"memory_id": memory_id, "error": error} for memory_id, error in sorted(failed.items()) if error]
        self._reexport.clear()

    def _tombstone(self, memory_id: str, olds: set[Target], plan: dict[str, dict[str, dict[str, dict[str, Any] | None]]]) -> None:
        """A hard-deleted memory's notes keep a tombstone without its content (so no merge revives it)."""
        trail = self.ledger.audit_of(memory_id)
        last = next((e["previous"] or e["current"] for e in reversed(trail) if (e["previous"] or e["current"] or {}).get("memory_type")), None)
        if last is None:
            return
        target, _ = self._target_of(last)
        olds = olds | ({target} if target else set())
        at = trail[-1]["at"] if trail else now_iso()
        metadata = {key: value for key, value in (last.get("metadata") or {}).items() if key in (NAMESPACE_KEY, "commit_sha", "commit", "git_commit")}
        tomb = {"id": memory_id, "memory_type": last["memory_type"], "content": "", "metadata": metadata,
                "importance_score": last.get("importance_score"), "version": int(last.get("version") or 1) + 1,
                "created_at": last.get("created_at"), "updated_at": at, "deleted": True, "deleted_at": at, "relationships": []}
        for ref, commit in olds:
            plan.setdefault(ref, {}).setdefault(commit, {})[memory_id] = tomb

    def _write_ref(self, ref: str, commits: Mapping[str, Mapping[str, dict[str, Any] | None]], report: SyncReport,
                   failed: dict[str, str]) -> None:
        """Apply one ref's planned changes, compare-and-swap, re-reading when another writer moved it."""
        for _ in range(MAX_ATTEMPTS):
            tip = self.repo.tip(ref)
            if len(commits) <= FEW_NOTES:  # a write or two: read those notes, not the whole ref
                texts = {c: t for c in commits if (t := self.repo.note(ref, c)) is not None} if tip else {}
            else:
                texts = self.repo.notes_at(tip)
            changes: dict[str, str | None] = {}
            for commit, wanted in commits.items():
                text = self._note_after(ref, commit, texts.get(commit), wanted, failed)
                if text is not False:
                    changes[commit] = text  # type: ignore[assignment]
            if not changes:
                return
            fault_point("git_notes:before_write")
            try:
                new = self.repo.write_notes(ref, changes, tip, "codemem: memories")
            except NotesRefMoved:
                continue
            report.notes_written += len(changes)
            if new is not None and self._imported_tips is not None and self._imported_tips.get(ref) == tip:
                self._imported_tips[ref] = new  # our own write: nothing in it to import
            return
        raise NotesRefMoved(f"{ref} kept changing while codemem wrote it — run `codemem notes sync` again")

    def _note_after(self, ref: str, commit: str, current: str | None, wanted: Mapping[str, dict[str, Any] | None],
                    failed: dict[str, str]) -> str | None | bool:
        """The note text after ``wanted`` (None: remove the note; False: leave it as it is)."""
        try:
            records = parse_note(current) if current is not None else []
        except MarkdownMemoryError as exc:
            for memory_id, record in wanted.items():
                if record is not None:
                    failed[memory_id] = (f"commit {commit[:12]} already has a note in {ref} that codemem cannot read ({exc}) — it is "
                                         f"left as it is; move it away (git notes --ref {ref} remove {commit[:12]}) and sync again")
            return False
        held = {str(r["id"]): r for r in records if r.get("id")}
        changed = False
        for memory_id, record in wanted.items():
            mine = held.get(memory_id)
            if record is None:
                if mine is not None:
                    del held[memory_id]
                    changed = True
            elif mine is None or not same_memory(mine, record):
                if mine is not None and record_rank(mine) > record_rank(record):
                    failed.setdefault(memory_id, "")  # a newer version from another clone: the next import takes it
                    continue
                held[memory_id] = record
                changed = True
        if not changed:
            return False
        kept = merge_records([r for r in records if not r.get("id")], list(held.values()))
        return render_note(kept) if kept else None

    # -- where a memory's note is ----------------------------------------------------------------------
    def _target_of(self, snapshot: Mapping[str, Any]) -> tuple[Target | None, str | None]:
        """(ref, commit) of a memory's note, or None; with the error when it names a commit this clone lacks."""
        metadata = snapshot.get("metadata") or {}
        namespace = namespace_of(str(snapshot.get("memory_type")), metadata)
        named = named_commit(metadata)
        if namespace is None or named is None:
            return None, None
        if named[1] not in self._commits:
            self._commits[named[1]] = self.repo.resolve(named[1])
        sha = self._commits[named[1]]
        if sha is None:
            return None, (f"metadata.{named[0]} names commit {named[1]!r}, which is not in this clone — `git fetch` it, or "
                          "correct the metadata (memory_update); its note is written at the next sync")
        return (namespace.ref, sha), None


def _unknown_namespace(name: str) -> str:
    return f"unknown namespace {name!r} — its notes are not read; codemem's namespaces are {', '.join(NAMESPACES)}"


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return value is not None

