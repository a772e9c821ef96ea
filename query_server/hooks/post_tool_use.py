"""PostToolUse (Read/Edit/Write/MultiEdit, Bash): the top memories about the files just touched.

Up to 3 memories as ``additionalContext`` — gotchas, patterns and designs first — each shown once
per session (``<state>/hooks/shown-<session>.txt``): about the file read or edited, or about the
project's files a Bash command names (``pytest tests/test_api.py``, ``python tools/migrate.py``;
seed 002 FR-029). Candidates come from the mentions cache (``query_server.hooks.mentions``) when
it is current, else from a scan of the ledger. An edit is also noted for the session
(``<state>/hooks/edited-<session>.txt``), which UserPromptSubmit reads
(``query_server.hooks.user_prompt_submit``). Standard library only (see ``query_server.hooks.dispatch``).
"""

import os

from query_server.hooks.common import (
    BUSY_TIMEOUT_S,
    Project,
    additional_context,
    edited_file,
    in_state_dir,
    json_loads,
    make_dir,
    memory_label,
    read_text,
    session_key,
)
from query_server.hooks.mentions import (
    lookup_mentions,
    mentions_cache,
    release_mentions,
)
from resources.manifest_reader import ManifestReader
from resources.memory.ledger_reader import LedgerReader

FILE_TOOLS = ("Read", "Edit", "Write", "MultiEdit")
EDIT_TOOLS = ("Edit", "Write", "MultiEdit")
BASH_PATHS = 3
"""Files of a Bash command whose memories are looked up (the first that exist in the project)."""
_SHELL_PUNCTUATION = str.maketrans({ch: " " for ch in ";&|()<>`'\"="})
MEMORIES_PER_FILE = 3
SYMBOLS_PER_FILE = 900
"""Symbols of the file whose anchored memories are looked up (one ``IN (…)`` list)."""
_GOTCHA = r"(?i)\b(gotchas?|pitfalls?|beware|caveats?|careful|workaround|foot-?guns?|watch out|do not|don't|never)\b"
"""What makes a memory's text a gotcha. ``_has_word`` finds it with string methods, as ``re.search`` would:
importing ``re`` costs a hook ~10 ms."""
_GOTCHA_WORDS = ("gotcha", "gotchas", "pitfall", "pitfalls", "beware", "caveat", "caveats", "careful", "workaround",
                 "footgun", "footguns", "foot-gun", "foot-guns", "watch out", "do not", "don't", "never")
"""``_GOTCHA``'s alternatives, spelled out."""
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})
"""What ``re`` ignoring case matches with ``i`` or ``s`` and ``str.lower`` does not lower to it (``İ`` lowers to two
characters): translated first, ``lower`` keeps every character's position."""
_TYPE_WEIGHT = {
    "code_pattern": 3.0, "design": 2.6, "requirements": 1.8, "test_history": 1.0, "component": 1.5,
    "user_preference": 1.2, "function": 1.0,
}
_MODULE_TAILS = {"__init__", "index", "mod", "lib", "main"}


def post_tool_use(project: Project, payload: dict) -> dict | None:
    """The top memories about the file just read or edited (or the files a Bash command names),
    each once per session."""
    tool = payload.get("tool_name")
    if not project.indexed or (tool not in FILE_TOOLS and tool != "Bash"):
        return None
    tool_input = payload.get("tool_input") or {}
    if not isinstance(tool_input, dict):
        return None
    session_id = str(payload.get("session_id") or "")
    if tool == "Bash":
        command = tool_input.get("command")
        rels = command_files(project, command, payload.get("cwd")) if isinstance(command, str) else []
    else:
        rel = _project_file(project, tool_input.get("file_path"), payload.get("cwd"))
        rels = [rel] if rel else []
        if rel and tool in EDIT_TOOLS and session_id:
            note_edit(project, session_id, rel)
    if not rels:
        return None
    shown_path = _shown_file(project, session_id) if session_id else None
    shown: set[str] = set()
    if shown_path is not None:
        try:
            shown = set(read_text(shown_path).split())
        except OSError:
            pass
    found: dict[str, tuple[float, str, str]] = {}  # memory id -> its hit for the first file that brings it
    for rel in rels:
        for hit in file_memories(project, rel, shown):
            found.setdefault(hit[1], hit)
    picked = sorted(found.values(), key=lambda item: (-item[0], item[1]))[:MEMORIES_PER_FILE]
    if not picked:
        return None
    if shown_path is not None:
        make_dir(os.path.dirname(shown_path), parents=True)
        with open(shown_path, "a", encoding="utf-8") as handle:  # appends of a few lines are atomic
            handle.write("".join(f"{memory_id}\n" for _, memory_id, _ in picked))
    about = rels[0] if tool != "Bash" else "the files this command uses (" + ", ".join(rels) + ")"
    text = "\n".join(
        [f"codemem: project memories about {about} (memory_get <id> shows one in full):"] + [line for _, _, line in picked]
    )
    return additional_context("PostToolUse", text)


def _project_file(project: Project, raw: object, cwd: object) -> str | None:
    """``raw`` as a repo-relative path of the project's (not the state dir's), else None."""
    if not isinstance(raw, str) or not raw:
        return None
    rel = project.relative(raw, cwd if isinstance(cwd, str) else None)
    if not rel or rel == "." or rel.startswith("../") or in_state_dir(project, os.path.join(project.root, rel)):
        return None
    return rel


def command_files(project: Project, command: str, cwd: object) -> list[str]:
    """The project's files a shell command names (words that are existing files, relative to the
    command's directory, outside the state dir), the first ``BASH_PATHS`` of them in order."""
    base = cwd if isinstance(cwd, str) and cwd else project.root
    found: list[str] = []
    for word in command[:4_000].translate(_SHELL_PUNCTUATION).split():
        word = word.partition("::")[0]  # pytest's tests/test_api.py::test_name
        if word.startswith("-") or ("/" not in word and "." not in word) or "$" in word or "*" in word:
            continue
        rel = _project_file(project, word, base)
        if rel and rel not in found and os.path.isfile(os.path.join(project.root, rel)):
            found.append(rel)
            if len(found) == BASH_PATHS:
                break
    return found


def note_edit(project: Project, session_id: str, rel: str) -> None:
    """Note that the session edited ``rel`` (an append of one line: atomic)."""
    make_dir(project.hooks_dir, parents=True)
    with open(edited_file(project, session_id), "a", encoding="utf-8") as handle:
        handle.write(rel + "\n")


def module_name(rel: str) -> str:
    """Dotted module name of a repo-relative file, as ``pipelines.qualified_names.module_name`` computes it
    (the path-based form: a Python symbol's qualified name starts with it)."""
    stem, _, _ = rel.rpartition(".")
    parts = (stem or rel).split("/")
    if len(parts) > 1 and parts[-1] in _MODULE_TAILS:
        parts.pop()
    return ".".join(parts)


def _mentions(text: str, needle: str, *, module: bool = False) -> bool:
    """``needle`` in ``text`` as a whole path (or dotted module) and not as part of a longer name."""
    start = text.find(needle)
    while start != -1:
        before = text[start - 1] if start else " "
        end = start + len(needle)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_.-") and not (after.isalnum() or after == "_" or (not module and after in "/-")):
            return True
        start = text.find(needle, start + 1)
    return False


def _shown_file(project: Project, session_id: str) -> str:
    return os.path.join(project.hooks_dir, f"shown-{session_key(session_id)}.txt")


def file_memories(project: Project, rel: str, exclude: set[str]) -> list[tuple[float, str, str]]:
    """Scored memories about ``rel``: [(score, memory id, rendered line)], best first.

    Candidates come from the mentions cache when it is current, else from a scan of the ledger
    (correct, but it reads every memory: ~10 ms per 10k memories and pattern).
    """
    ledger = LedgerReader.open(project.ledger_path, BUSY_TIMEOUT_S, project.kept)
    if ledger is None:
        return []
    try:
        module = module_name(rel)
        anchored, stale = anchor_matches(project, ledger, rel)
        cache = mentions_cache(project, ledger)
        if cache is not None:
            try:
                strengths = lookup_mentions(cache, project, rel, module)
            finally:
                release_mentions(project, cache)
            for memory_id in anchored:
                strengths[memory_id] = 1.0
            rows = ledger.active([i for i in strengths if i not in exclude])
        else:
            strengths = None
            rows = ledger.mentioning(rel, module, anchored)
    finally:
        ledger.close()

    scored: list[tuple[float, str, str]] = []
    for memory_id, memory_type, content, metadata, importance in rows:
        if memory_id in exclude:
            continue
        try:
            meta = json_loads(metadata)
        except ValueError:
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        if strengths is not None:
            strength = strengths.get(memory_id, 0.0)
        else:
            strength = match_strength(rel, module, memory_id in anchored, content, metadata, meta)
        if strength <= 0:
            continue
        weight = _TYPE_WEIGHT.get(memory_type, 1.0)
        if memory_type == "test_history" and meta.get("status") in ("Failed", "Error"):
            weight = 2.0
        if _is_gotcha(content, meta):
            weight = max(weight, 4.0)
        score = weight * strength + 0.5 * float(importance or 0)
        line = memory_label(memory_type, content, meta, 280)
        if memory_id in stale:
            line += " (stale: its anchored code changed since — verify)"
        scored.append((score, memory_id, f"- {line} (id {memory_id})"))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return scored


def anchor_matches(project: Project, ledger: LedgerReader, rel: str) -> tuple[set[str], set[str]]:
    """(memories anchored to a symbol of ``rel``, the stale ones among them) from ``anchor_state``."""
    manifest = ManifestReader.open(project.index_path, BUSY_TIMEOUT_S, project.kept)
    if manifest is None:
        return set(), set()
    try:
        names = manifest.qualified_names(rel, SYMBOLS_PER_FILE)
    finally:
        manifest.close()
    if not names:
        return set(), set()
    return ledger.anchored(names)


def match_strength(rel: str, module: str, anchored: bool, content: str, raw_meta: str, meta: dict) -> float:
    """How surely a memory (found by the ledger scan) is about ``rel``: 1.0 anchored or its file,
    0.8 naming the path, 0.6 naming its dotted module, 0 not about it. A memory about a directory
    that holds the file (a package's component) is not about the file: it would come with every
    file of the package."""
    if anchored:
        return 1.0
    file_path = meta.get("file_path")
    if isinstance(file_path, str) and file_path:
        clean = file_path.strip().lstrip("./").rstrip("/")
        if clean == rel:
            return 1.0
    anchors = meta.get("anchors")
    if isinstance(anchors, list):
        for anchor in anchors:
            name = anchor.get("qualified_name") if isinstance(anchor, dict) else anchor
            if isinstance(name, str) and (name == module or name.startswith(module + ".")):
                return 1.0
    if _mentions(content, rel) or _mentions(raw_meta, rel):
        return 0.8
    if "." in module and (_mentions(content, module, module=True) or _mentions(raw_meta, module, module=True)):
        return 0.6
    return 0.0


def _is_gotcha(content: str, meta: dict) -> bool:
    tags = meta.get("tags")
    if isinstance(tags, list) and any(isinstance(t, str) and t.lower() in ("gotcha", "pitfall", "warning") for t in tags):
        return True
    if str(meta.get("kind", "")).lower() == "gotcha" or str(meta.get("category", "")).lower() == "gotcha":
        return True
    return _has_word(content[:600], _GOTCHA_WORDS)


def _has_word(text: str, words: tuple[str, ...]) -> bool:
    """True when one of the lower-case ``words`` is in ``text`` as ``re.search(r"(?i)\b(…)\b", text)`` finds it:
    in any case (``re``'s rules) and between word boundaries (each word starts and ends with a letter)."""
    folded = text.translate(_FOLD).lower()
    for word in words:
        start = folded.find(word)
        while start != -1:
            end = start + len(word)
            if (start == 0 or not _word_char(text[start - 1])) and (end == len(text) or not _word_char(text[end])):
                return True
            start = folded.find(word, start + 1)
    return False


def _word_char(ch: str) -> bool:
    """``re``'s ``\\w`` for one character of a str."""
    return ch.isalnum() or ch == "_"
