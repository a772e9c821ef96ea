"""Memories as Markdown files with YAML front matter (seed 002's layout), and several of them in one
git note (seed 003): rendering and parsing, plus writing and reading an export directory.

One memory is one document::

    ---
    id: 5f0c...            # the memory's id, created_at, updated_at, version, importance_score
    memory_type: design
    tags: [auth]           # metadata.tags, when it is a list of strings (seed 002's tags)
    metadata:              # the typed metadata, nested (so a field such as component.version
      title: ADR-7 tokens  # never collides with the memory's own fields)
    relationships:
    - type: ADDRESSES
      target_id: REQ-AUTH-001
      target_kind: memory:requirements
    ---
    Sessions are JWTs signed with a rotating key.

The body after the closing ``---`` line is the content, byte for byte, plus one final newline that
parsing removes again; so a render followed by a parse gives back the same record (the property test
in ``tests/resources/test_memory_markdown.py`` checks it). The front matter always closes at the first
line that is exactly ``---``: the YAML written here indents every continuation line, so no value can
end it early, and content may itself contain ``---`` lines or front-matter look-alikes.

A record is what ``export_memory`` writes per memory: id, memory_type, content, metadata,
importance_score, version, created_at, updated_at, deleted, deleted_at and relationships (each
type, target_id, target_kind, properties). ``access_count`` and ``sync_status`` are left out on
purpose: they change on every read and would make a version-controlled export directory churn.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

FRONT_MATTER_FIELDS = (
    "id", "memory_type", "created_at", "updated_at", "version", "importance_score",
    "deleted", "deleted_at", "tags", "metadata", "relationships",
)
"""Top-level front matter keys, in the order they are written."""
SLUG_CHARS = 60
TITLE_KEYS = ("title", "pattern_name", "name", "test_name", "key", "requirement_id", "component_id")
"""Metadata that names a memory, first found wins (as ``memory_projection.memory_title``, whose module
is not imported here: it pulls in the vector and graph stores)."""
NOTE_HEADER = re.compile(r"codemem memories: (\d+) \(boundary ([0-9a-f]{8,64})\)")
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_QUOTE_ALWAYS = re.compile("[\r\x85\u2028\u2029\ufeff]")
"""Characters YAML readers treat as line breaks (or strip): such strings are written double-quoted, escaped."""


class MarkdownMemoryError(ValueError):
    """A memory file (or note) that cannot be read; the message names the field and what to do."""


@cache
def _yaml() -> tuple[Any, type, type]:
    """PyYAML with this module's loader and dumper, built on first use: the memory tools import this
    module on every server's start, and only notes, exports and imports read or write YAML (~20 ms)."""
    import yaml

    base_loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    base_dumper: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class Loader(base_loader):  # type: ignore[misc, valid-type]
        """Safe YAML, except that unquoted timestamps stay strings (memories keep ISO text, never datetimes)."""

        yaml_implicit_resolvers = {
            first: [resolver for resolver in resolvers if resolver[0] != _TIMESTAMP]
            for first, resolvers in base_loader.yaml_implicit_resolvers.items()
        }

    class Dumper(base_dumper):  # type: ignore[misc, valid-type]
        """Safe YAML without anchors; multi-line strings as literal blocks where YAML allows it."""

        def ignore_aliases(self, data: Any) -> bool:  # noqa: ARG002 - never write &id001 anchors
            return True

    Dumper.add_representer(str, _represent_str)
    return yaml, Loader, Dumper


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if _QUOTE_ALWAYS.search(value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    if "\n" in value:  # the emitter falls back to a quoted style when a literal block cannot hold it exactly
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_str(value)


def _dump(data: Any) -> str:
    yaml, _, dumper = _yaml()
    return yaml.dump(data, Dumper=dumper, allow_unicode=True, sort_keys=False, default_flow_style=False, width=100)


# -- file names ------------------------------------------------------------------------------------
def slugify(text: str, *, fallback: str = "memory") -> str:
    """A file-name slug: ASCII lower case words joined by '-', at most 60 characters ('' -> fallback)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > SLUG_CHARS:
        slug = slug[:SLUG_CHARS].rsplit("-", 1)[0] if "-" in slug[:SLUG_CHARS] else slug[:SLUG_CHARS]
    return slug or fallback


def memory_file_name(record: Mapping[str, Any], *, full_id: bool = False) -> PurePosixPath:
    """Where a memory goes in an export directory: ``<memory_type>/<slug of its title>-<short id>.md``.

    The title is the metadata's title (title, pattern_name, name, test_name, key, ...) or else the
    first line of the content; the short id is the first 8 characters of the memory id (the whole id
    with ``full_id``, for the rare two memories whose slug and short id agree).
    """
    memory_type = str(record["memory_type"])
    metadata = record.get("metadata") or {}
    content = str(record.get("content") or "")
    title = next((metadata[key] for key in TITLE_KEYS if isinstance(metadata.get(key), str) and metadata[key].strip()), None)
    title = title or next((line for line in content.splitlines() if line.strip()), "")
    short_id = re.sub(r"[^0-9a-zA-Z-]", "", str(record["id"])).lower()
    return PurePosixPath(memory_type, f"{slugify(title, fallback=memory_type)}-{short_id if full_id else short_id[:8]}.md")


# -- one memory ----------------------------------------------------------------------------------
def render_memory(record: Mapping[str, Any]) -> str:
    """One memory as Markdown: YAML front matter, then the content.

    Args:
        record: A memory as ``export_memory`` writes it (see the module docstring).

    Returns:
        The document; ``parse_memory`` reads it back into the same record.
    """
    metadata = dict(record.get("metadata") or {})
    front: dict[str, Any] = {
        "id": record["id"],
        "memory_type": str(record["memory_type"]),
        "created_at": record.get("created_at"),
        "updated_at": record.get("updated_at"),
        "version": record.get("version"),
        "importance_score": record.get("importance_score"),
    }
    front = {key: value for key, value in front.items() if value is not None}
    if record.get("deleted"):
        front["deleted"] = True
        front["deleted_at"] = record.get("deleted_at")
    tags = metadata.get("tags")
    if isinstance(tags, list) and all(isinstance(tag, str) for tag in tags):
        front["tags"] = metadata.pop("tags")
    front["metadata"] = metadata
    relationships = []
    for rel in record.get("relationships") or []:
        item = {"type": rel["type"], "target_id": rel["target_id"], "target_kind": rel.get("target_kind", "memory")}
        if rel.get("properties"):
            item["properties"] = rel["properties"]
        relationships.append(item)
    if relationships:
        front["relationships"] = relationships
    return f"---\n{_dump(front)}---\n{record['content']}\n"


def _yaml_problem(exc: yaml.YAMLError, first_line: int) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + first_line}, column {mark.column + 1}" if mark is not None else ""
    return f"front matter is not valid YAML: {problem}{where} — fix the YAML between the two '---' lines (quote values that contain ': ' or start with a special character)"


def _timestamp_field(front: dict[str, Any], key: str) -> None:
    value = front.get(key)
    if value is None:
        return
    if isinstance(value, datetime):  # a loader that resolved it after all
        front[key] = value = value.isoformat()
    if not isinstance(value, str):
        raise MarkdownMemoryError(f"front matter field {key}: must be an ISO 8601 timestamp such as 2025-01-31T14:05:00+00:00 (got {value!r})")
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        raise MarkdownMemoryError(f"front matter field {key}: must be an ISO 8601 timestamp such as 2025-01-31T14:05:00+00:00 (got {value!r})") from None


def parse_memory(text: str) -> dict[str, Any]:
    """Read one memory document written by ``render_memory`` (or by hand in the same shape).

    Only ``memory_type`` is required in the front matter; the others are returned when present
    (an import gives a memory without id a new one). The memory type and the metadata are checked
    against the schemas by the importer, not here.

    Args:
        text: The whole document (``\\r\\n`` line ends are accepted around the front matter).

    Returns:
        The record: the front matter's fields, ``content``, ``metadata`` ({} when absent),
        ``relationships`` ([] when absent), ``deleted`` (False) and ``deleted_at`` (None).

    Raises:
        MarkdownMemoryError: No or unclosed front matter, bad YAML (with its line in the file), an
            unknown or ill-typed field; the message names it.
    """
    text = text.removeprefix("\ufeff")
    opening = re.match(r"---[ \t]*\r?\n", text)
    if opening is None:
        raise MarkdownMemoryError("no YAML front matter — the file must start with a '---' line, then fields such as memory_type: design, then '---'")
    closing = re.compile(r"^---[ \t]*\r?$\n?", re.MULTILINE).search(text, opening.end())
    if closing is None:
        raise MarkdownMemoryError("front matter is not closed — add a line '---' between the front matter and the content")
    yaml, loader, _ = _yaml()
    try:
        front = yaml.load(text[opening.end() : closing.start()], Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise MarkdownMemoryError(_yaml_problem(exc, first_line=2)) from None
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise MarkdownMemoryError(f"front matter must be a mapping of fields (memory_type: ..., metadata: ...), not a {type(front).__name__}")
    unknown = [str(key) for key in front if key not in FRONT_MATTER_FIELDS]
    if unknown:
        raise MarkdownMemoryError(
            f"unknown front matter field {unknown[0]!r} — put metadata fields under 'metadata:'; "
            f"the top-level fields are {', '.join(FRONT_MATTER_FIELDS)}"
        )
    if "memory_type" not in front or front["memory_type"] in (None, ""):
        raise MarkdownMemoryError("front matter field memory_type is missing — e.g. memory_type: design")
    for key in ("id", "memory_type"):
        if key in front and not isinstance(front[key], str):
            raise MarkdownMemoryError(f"front matter field {key}: must be a string (got {front[key]!r}) — quote it")
    for key in ("created_at", "updated_at", "deleted_at"):
        _timestamp_field(front, key)
    version = front.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise MarkdownMemoryError(f"front matter field version: must be a whole number >= 1 (got {version!r})")
    if not isinstance(front.get("deleted", False), bool):
        raise MarkdownMemoryError(f"front matter field deleted: must be true or false (got {front['deleted']!r})")
    metadata = front.pop("metadata", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise MarkdownMemoryError(f"front matter field metadata: must be a mapping of metadata fields (got {type(metadata).__name__})")
    metadata = {str(key): value for key, value in metadata.items()}
    tags = front.pop("tags", None)
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            raise MarkdownMemoryError(f"front matter field tags: must be a list of strings, e.g. [auth, api] (got {tags!r})")
        if "tags" in metadata:
            raise MarkdownMemoryError("tags are given twice (front matter tags and metadata.tags) — keep one")
        metadata["tags"] = tags
    relationships = []
    for index, rel in enumerate(front.pop("relationships", None) or []):
        if not isinstance(rel, dict) or not isinstance(rel.get("type"), str) or not isinstance(rel.get("target_id"), str):
            raise MarkdownMemoryError(f"front matter field relationships[{index}]: needs type and target_id strings (got {rel!r})")
        properties = rel.get("properties") or {}
        if not isinstance(properties, dict):
            raise MarkdownMemoryError(f"front matter field relationships[{index}].properties: must be a mapping")
        relationships.append({
            "type": rel["type"], "target_id": rel["target_id"],
            "target_kind": str(rel.get("target_kind") or "memory"), "properties": properties,
        })
    content = text[closing.end() :]
    content = content[:-1] if content.endswith("\n") else content
    record: dict[str, Any] = {key: value for key, value in front.items() if value is not None}
    record.update(
        content=content, metadata=metadata, relationships=relationships,
        deleted=bool(front.get("deleted", False)), deleted_at=front.get("deleted_at"),
    )
    return record


# -- several memories in one git note --------------------------------------------------------------
def render_note(records: Iterable[Mapping[str, Any]]) -> str:
    """Several memories as one git note: a header line naming a boundary, then each memory's document
    after a ``--<boundary>`` line (a boundary that occurs in none of them, as in MIME multipart; derived
    from the documents, so the same memories always give the same text)."""
    documents = [render_memory(record) for record in records]
    digest = hashlib.sha256("".join(documents).encode("utf-8"))
    boundary = digest.hexdigest()[:12]  # the same memories give the same note (no needless notes commits)
    while any(boundary in document for document in documents):
        digest.update(b"+")
        boundary = digest.hexdigest()[:12]
    parts = "".join(f"--{boundary}\n{document}" for document in documents)
    return f"codemem memories: {len(documents)} (boundary {boundary})\n{parts}"


def parse_note(text: str) -> list[dict[str, Any]]:
    """The memories of a note written by ``render_note``.

    Raises:
        MarkdownMemoryError: Not a codemem note, or a memory in it that does not parse (with its index).
    """
    header, _, rest = text.partition("\n")
    match = NOTE_HEADER.fullmatch(header.strip())
    if match is None:
        raise MarkdownMemoryError("not a codemem note — its first line must read 'codemem memories: N (boundary B)'")
    separator = f"--{match.group(2)}\n"
    parts = rest.split(separator)
    if parts[0].strip():
        raise MarkdownMemoryError(f"unexpected text before the first '--{match.group(2)}' line")
    records = []
    for index, part in enumerate(parts[1:]):
        try:
            records.append(parse_memory(part))
        except MarkdownMemoryError as exc:
            raise MarkdownMemoryError(f"memory {index + 1} of the note: {exc}") from None
    if len(records) != int(match.group(1)):
        raise MarkdownMemoryError(f"the note announces {match.group(1)} memories but holds {len(records)}")
    return records


# -- an export directory ---------------------------------------------------------------------------
def write_directory(
    target: Path, records: Sequence[Mapping[str, Any]], *, prune_types: Iterable[str] = (), overwrite: bool = False,
) -> tuple[int, int]:
    """Write each memory to ``target/<memory_type>/<slug>-<short id>.md``; files whose text is already
    the same are left untouched (a version-controlled directory shows only real changes).

    Args:
        target: The export directory (created when missing).
        records: The memories, as ``render_memory`` takes them.
        prune_types: Memory types whose directory mirrors the export: a memory file there (it parses and
            has an id) that was not written now is removed — its memory was deleted, or renamed to a new
            slug. Other files are never touched.
        overwrite: Also replace a file in the way that is not an earlier export of the same memory.

    Returns:
        (files written or unchanged, files removed).

    Raises:
        MarkdownMemoryError: before anything is written, when a file in the way is not an earlier export
            of its memory (and ``overwrite`` is off), or a type folder leads out of ``target``.
    """
    target.mkdir(parents=True, exist_ok=True)
    planned: dict[Path, bytes] = {}
    for record in records:
        path = target / memory_file_name(record)
        if path in planned:
            path = target / memory_file_name(record, full_id=True)
        planned[path] = data = render_memory(record).encode("utf-8")
        _check_destination(target, path, data, str(record["id"]), overwrite=overwrite)
    written = set(planned)
    for path, data in planned.items():
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    removed = 0
    for memory_type in prune_types:
        folder = target / str(memory_type)
        if not folder.resolve().is_relative_to(target.resolve()):
            continue  # a symlink out of the export: never delete there
        for path in sorted(folder.glob("*.md")):
            if path in written:
                continue
            try:
                old = parse_memory(path.read_bytes().decode("utf-8"))
            except (OSError, UnicodeDecodeError, MarkdownMemoryError):
                continue  # not a memory file of ours: leave it alone
            if old.get("id") and old.get("memory_type") == str(memory_type):
                path.unlink()
                removed += 1
    return len(written), removed


def _check_destination(target: Path, path: Path, data: bytes, memory_id: str, *, overwrite: bool) -> None:
    """Refuse a memory file whose folder leads out of ``target`` (a symlinked type folder), or that
    would replace a file which is not an earlier export of the same memory (unless ``overwrite``)."""
    if not path.parent.resolve().is_relative_to(target.resolve()):
        raise MarkdownMemoryError(
            f"{path.parent.name}/ in {target} leads outside the export directory (a symlink?) — remove it or "
            "export to another directory"
        )
    if overwrite or path.is_symlink() or not path.exists():
        return  # a symlink in the way is replaced by the file, never written through
    if not path.is_file():
        raise MarkdownMemoryError(f"{path} is in the way and is not a file — remove it or export to another directory")
    try:
        existing = path.read_bytes()
        earlier_id = existing == data or parse_memory(existing.decode("utf-8")).get("id") == memory_id
    except (OSError, UnicodeDecodeError, MarkdownMemoryError):
        earlier_id = False
    if not earlier_id:
        raise MarkdownMemoryError(
            f"{path} already exists and is not an earlier export of memory {memory_id} — nothing was written; "
            "pass overwrite=true (`--overwrite`) to replace it, or export to another directory"
        )


def read_directory(source: Path) -> list[tuple[Path, dict[str, Any] | MarkdownMemoryError]]:
    """The memories of every ``*.md`` file under ``source`` (or of the one file ``source``), in path
    order, skipping hidden files and directories: (path, record), or (path, the error) for a file that
    does not parse."""
    if source.is_file():
        files = [source]
    else:
        files = sorted(
            path for path in source.rglob("*.md")
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(source).parts)
        )
    read: list[tuple[Path, dict[str, Any] | MarkdownMemoryError]] = []
    for path in files:
        try:
            read.append((path, parse_memory(path.read_bytes().decode("utf-8"))))
        except UnicodeDecodeError as exc:
            read.append((path, MarkdownMemoryError(f"not UTF-8 text (byte {exc.start}) — save the file as UTF-8")))
        except OSError as exc:
            read.append((path, MarkdownMemoryError(f"cannot read the file: {exc.strerror}")))
        except MarkdownMemoryError as exc:
            read.append((path, exc))
    return read
