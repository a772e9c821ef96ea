"""The read-only check of client Cypher (``graph_query``), before it is sent.

The backend's read-only mode (Neo4j read transactions, FalkorDB ``GRAPH.RO_QUERY``) is the real
guarantee; this check gives a clear message first.
"""

from __future__ import annotations

import re

from resources.graph.model import ReadOnlyViolation
from resources.text.identifiers import identifier_words

_WRITE_CLAUSES = frozenset(
    {
        "CREATE",
        "MERGE",
        "SET",
        "DELETE",
        "REMOVE",
        "DROP",
        "FOREACH",
        "ALTER",
        "RENAME",
        "GRANT",
        "DENY",
        "REVOKE",
        "TERMINATE",
    }
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROCEDURE = re.compile(
    r"\bCALL\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)", re.IGNORECASE
)
_WRITE_VERBS = frozenset(
    {
        "create",
        "drop",
        "delete",
        "remove",
        "merge",
        "set",
        "add",
        "clear",
        "kill",
        "terminate",
        "load",
        "write",
        "import",
        "refactor",
        "periodic",
        "upgrade",
        "reset",
        "rename",
        "truncate",
        "flush",
        "commit",
        "mutate",
        "stop",
        "start",
        "enable",
        "disable",
        "alter",
        "grant",
        "revoke",
        "deny",
        "copy",
        "restore",
        "backup",
        "checkpoint",
        "await",
        "do",  # apoc.cypher.doIt, apoc.do.when/case: run a write statement given as a string
    }
)
_READ_PROCEDURE_PREFIXES = (
    "db.labels",
    "db.relationshiptypes",
    "db.propertykeys",
    "db.indexes",
    "db.constraints",
    "db.schema.",
    "db.meta.stats",
    "db.info",
    "db.ping",
    "db.idx.fulltext.query",
    "db.idx.vector.query",
    "db.index.fulltext.query",
    "db.index.vector.query",
    "dbms.components",
    "dbms.procedures",
    "dbms.functions",
    "dbms.info",
    "dbms.showcurrentuser",
)


def strip_cypher(cypher: str) -> str:
    """Blank out comments, string literals and backtick-quoted names of a Cypher text.

    Comments become a space, strings become ``''`` and quoted names become ``_q``, so keyword
    checks see only the statement's own words.

    Args:
        cypher: Cypher text.

    Returns:
        The text with those parts replaced (an unterminated one runs to the end).
    """
    out: list[str] = []
    i, n = 0, len(cypher)
    while i < n:
        ch = cypher[i]
        two = cypher[i : i + 2]
        if two == "//":
            end = cypher.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        elif two == "/*":
            end = cypher.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif ch in ("'", '"'):
            i += 1
            while i < n and cypher[i] != ch:
                i += 2 if cypher[i] == "\\" else 1
            i += 1
            out.append(" '' ")
        elif ch == "`":
            i += 1
            while i < n:
                if cypher[i] == "`":
                    if cypher[i + 1 : i + 2] == "`":  # doubled backtick escapes itself
                        i += 2
                        continue
                    break
                i += 1
            i += 1
            out.append(" _q ")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _neighbour(text: str, index: int, step: int) -> str:
    while 0 <= index < len(text) and text[index].isspace():
        index += step
    return text[index] if 0 <= index < len(text) else ""


def _is_write_procedure(name: str) -> bool:
    lowered = name.lower()
    if lowered.startswith(("db.", "dbms.")) and not lowered.startswith(_READ_PROCEDURE_PREFIXES):
        return True
    words = {word for part in name.split(".") for word in identifier_words(part, unicode_digits=True)}
    return bool(words & _WRITE_VERBS)


def assert_read_only(cypher: str) -> None:
    """Refuse Cypher that could change the graph, before it is sent.

    The check runs on :func:`strip_cypher` output, case-insensitively. A keyword counts when it
    stands as a clause word: not a property (``n.set``), a parameter (``$create``), a label or
    type (``:Merge``) or a map key (``{delete: 1}``). So ``RETURN 'create'``, a comment saying
    "delete" or a property ``created_at`` pass. Refused: CREATE, MERGE, SET, DELETE (incl.
    DETACH DELETE), REMOVE, DROP, FOREACH, LOAD CSV, administration clauses (ALTER, GRANT, ...),
    and CALL of procedures that write (``db.*``/``dbms.*`` outside a read allow-list, or any
    procedure whose name contains a write verb such as create/drop/set). The backend's read-only
    mode remains the real guarantee; this gives a clear message first.

    Args:
        cypher: The client's Cypher.

    Raises:
        ReadOnlyViolation: If a write clause or write procedure call is found.
    """
    text = strip_cypher(cypher)
    for match in _WORD.finditer(text):
        word = match.group(0).upper()
        if word not in _WRITE_CLAUSES and word not in ("LOAD", "START", "STOP"):
            continue
        before = _neighbour(text, match.start() - 1, -1)
        after = _neighbour(text, match.end(), 1)
        if before in (".", "$", ":") or after == ":":
            continue
        if word == "LOAD":
            rest = text[match.end() :].lstrip()
            if rest[:3].upper() == "CSV":
                raise ReadOnlyViolation("LOAD CSV")
            continue
        if word in ("START", "STOP"):
            rest = text[match.end() :].lstrip()
            if rest[:8].upper() == "DATABASE":
                raise ReadOnlyViolation(f"{word} DATABASE")
            continue
        raise ReadOnlyViolation(word)
    for match in _PROCEDURE.finditer(text):
        name = re.sub(r"\s+", "", match.group(1))
        if _is_write_procedure(name):
            raise ReadOnlyViolation(f"CALL {name}")
