"""Every Cypher statement codemem writes to its code graph, in one place.

The statements run unchanged on FalkorDB (embedded, via falkordblite) and on Neo4j 5: they use
only the common subset of openCypher the two share: ``UNWIND $rows``/``FOREACH`` batches with
parameters, ``MERGE`` on ``id``, ``SET n += map``, no APOC, no ``EXISTS {}``/``COUNT {}``
subqueries, no label alternation (``:A|B``) in node patterns, no ``=~``.

Labels and relationship types cannot be parameters in either backend, so statements that need
them are built by small functions that accept only the whitelisted names below (never user
text). Schema statements (indexes/constraints) are the one place the dialects differ; both
variants live here.

Graph model (from the seed, section 8):

* Nodes ``File``, ``Module``, ``Class``, ``Function``; every node has a deterministic string
  ``id``; ``Function``/``Class`` also carry ``memory_id`` (the same value).
* Relationships ``CONTAINS``, ``IMPORTS``, ``CALLS``, ``EXTENDS``, ``IMPLEMENTS``, each with
  ``created_at`` (ISO-8601 string); ``CALLS`` may carry ``line_number``, ``IMPORTS`` ``items``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

NodeLabel = Literal[
    "File", "Module", "Class", "Function",
    "Requirement", "Design", "Pattern", "Component", "FunctionNote", "Test", "Session", "Preference",
]
"""Node labels: the code graph's four, then one per memory type (memory nodes are projections of
the memory ledger and carry ``memory_id``)."""

EdgeType = Literal[
    "CONTAINS", "IMPORTS", "CALLS", "EXTENDS", "IMPLEMENTS",
    "IMPLEMENTS_REQ", "ADDRESSES", "DEPENDS_ON", "USES_PATTERN", "TESTS", "SATISFIES",
    "FOLLOWS_PATTERN", "FOLLOWS_DESIGN", "TESTED_BY", "RELATES_TO",
]
"""Relationship types: the code graph's five, then those memories use (seed 001 section 8.3 and
seed 004's relationship table, plus a generic RELATES_TO)."""

NODE_LABELS: Final[tuple[NodeLabel, ...]] = ("File", "Module", "Class", "Function")
"""Labels of the code graph (nodes tied to a source file)."""
SYMBOL_LABELS: Final[tuple[NodeLabel, ...]] = ("Class", "Function")
"""Labels of the code graph's symbol nodes (``pipelines.records.graph_label``)."""
EDGE_TYPES: Final[tuple[EdgeType, ...]] = ("CONTAINS", "IMPORTS", "CALLS", "EXTENDS", "IMPLEMENTS")
"""Relationship types of the code graph."""

MEMORY_LABELS: Final[tuple[NodeLabel, ...]] = (
    "Requirement", "Design", "Pattern", "Component", "FunctionNote", "Test", "Session", "Preference",
)
"""Labels of memory nodes."""
MEMORY_EDGE_TYPES: Final[tuple[EdgeType, ...]] = (
    "IMPLEMENTS_REQ", "ADDRESSES", "DEPENDS_ON", "USES_PATTERN", "TESTS", "SATISFIES",
    "FOLLOWS_PATTERN", "FOLLOWS_DESIGN", "TESTED_BY", "RELATES_TO",
)
"""Relationship types written from memories."""

ALL_LABELS: Final[tuple[NodeLabel, ...]] = NODE_LABELS + MEMORY_LABELS
ALL_EDGE_TYPES: Final[tuple[EdgeType, ...]] = EDGE_TYPES + MEMORY_EDGE_TYPES

FILE_PATH_PROPERTY: Final[dict[NodeLabel, str]] = {
    "File": "path",
    "Module": "file_path",
    "Class": "file_path",
    "Function": "file_path",
}
"""The property that ties a node to the source file it came from, per label."""

INDEXED_PROPERTIES: Final[dict[NodeLabel, tuple[str, ...]]] = {
    "File": ("id", "path", "language"),
    "Module": ("id", "name", "file_path"),
    "Class": ("id", "memory_id", "name", "qualified_name", "path_qualified_name", "file_path"),
    "Function": ("id", "memory_id", "name", "qualified_name", "path_qualified_name", "file_path"),
    **{label: ("id",) for label in MEMORY_LABELS},
    "Requirement": ("id", "requirement_id"),
}
"""Lookup (exact-match/range) indexes: the seed's index strategy plus ``id`` on every label."""

UNIQUE_PROPERTIES: Final[dict[NodeLabel, tuple[str, ...]]] = {
    "File": ("id", "path"),
    "Module": ("id",),
    "Class": ("id",),
    "Function": ("id",),
    **{label: ("id",) for label in MEMORY_LABELS},
}
"""Properties with a uniqueness constraint, per label."""


def check_label(label: str) -> NodeLabel:
    """Return ``label`` if it is a code-graph node label.

    Args:
        label: A candidate label.

    Returns:
        The label, typed.

    Raises:
        ValueError: If the label is not one of :data:`NODE_LABELS`.
    """
    if label not in ALL_LABELS:
        raise ValueError(f"unknown node label {label!r}; expected one of {ALL_LABELS}")
    return label  # type: ignore[return-value]


def check_edge_type(edge_type: str) -> EdgeType:
    """Return ``edge_type`` if it is a code-graph relationship type.

    Args:
        edge_type: A candidate relationship type.

    Returns:
        The type, typed.

    Raises:
        ValueError: If the type is not one of :data:`EDGE_TYPES`.
    """
    if edge_type not in ALL_EDGE_TYPES:
        raise ValueError(f"unknown relationship type {edge_type!r}; expected one of {ALL_EDGE_TYPES}")
    return edge_type  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# Schema (dialect-specific)
# --------------------------------------------------------------------------------------------


_SEED_INDEX_NAMES: Final[dict[tuple[str, str], str]] = {
    ("Function", "file_path"): "idx_function_file",
}
"""Index names the seed gives that differ from the ``idx_<label>_<prop>`` pattern."""


def neo4j_schema_statements() -> list[str]:
    """Neo4j 5 constraints and indexes, idempotent (``IF NOT EXISTS``).

    A uniqueness constraint brings its own index, so those properties get no separate index.

    Returns:
        Statements to run one by one in auto-commit transactions.
    """
    statements: list[str] = []
    for label in ALL_LABELS:
        for prop in UNIQUE_PROPERTIES[label]:
            statements.append(
                f"CREATE CONSTRAINT {label.lower()}_{prop}_unique IF NOT EXISTS "
                f"FOR (n:{label}) REQUIRE n.{prop} IS UNIQUE"
            )
    for label in ALL_LABELS:
        for prop in INDEXED_PROPERTIES[label]:
            if prop in UNIQUE_PROPERTIES[label]:
                continue
            name = _SEED_INDEX_NAMES.get((label, prop), f"idx_{label.lower()}_{prop}")
            statements.append(f"CREATE INDEX {name} IF NOT EXISTS FOR (n:{label}) ON (n.{prop})")
    return statements


def falkor_index_statement(label: str, prop: str) -> str:
    """FalkorDB range-index statement for one property (errors if it already exists).

    FalkorDB has no ``IF NOT EXISTS``; the caller treats "already indexed" as success.

    Args:
        label: Node label (whitelisted).
        prop: Property name from :data:`INDEXED_PROPERTIES`.

    Returns:
        The statement.
    """
    check_label(label)
    if prop not in INDEXED_PROPERTIES[label]:  # type: ignore[index]
        raise ValueError(f"{label}.{prop} is not an indexed property")
    return f"CREATE INDEX FOR (n:{label}) ON (n.{prop})"


# --------------------------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------------------------


def merge_nodes_query(label: str) -> str:
    """Upsert a batch of nodes of one label by ``id``.

    Parameters: ``$rows``: list of ``{id: str, props: map}``.
    Returns one row ``written`` (the number of rows merged).

    Args:
        label: Node label (whitelisted).

    Returns:
        The statement.
    """
    check_label(label)
    return (
        f"UNWIND $rows AS row MERGE (n:{label} {{id: row.id}}) SET n += row.props RETURN count(n) AS written"
    )


def merge_edges_query(edge_type: str, source_label: str, target_label: str) -> str:
    """Upsert a batch of relationships between existing nodes; rows with a missing endpoint are
    skipped (the ``MATCH`` finds nothing).

    Parameters: ``$rows``: list of ``{source: str, target: str, props: map}``.
    Returns one row ``written``.

    Args:
        edge_type: Relationship type (whitelisted).
        source_label: Label of the source nodes (whitelisted).
        target_label: Label of the target nodes (whitelisted).

    Returns:
        The statement.
    """
    check_edge_type(edge_type)
    check_label(source_label)
    check_label(target_label)
    return (
        f"UNWIND $rows AS row MATCH (a:{source_label} {{id: row.source}}) "
        f"MATCH (b:{target_label} {{id: row.target}}) "
        f"MERGE (a)-[r:{edge_type}]->(b) SET r += row.props RETURN count(r) AS written"
    )


def delete_edges_query(edge_type: str, source_label: str, target_label: str) -> str:
    """Delete a batch of relationships identified by endpoint ids and type.

    Parameters: ``$rows``: list of ``{source: str, target: str}``.
    Returns one row ``removed``.

    Args:
        edge_type: Relationship type (whitelisted).
        source_label: Label of the source nodes (whitelisted).
        target_label: Label of the target nodes (whitelisted).

    Returns:
        The statement.
    """
    check_edge_type(edge_type)
    check_label(source_label)
    check_label(target_label)
    return (
        f"UNWIND $rows AS row MATCH (a:{source_label} {{id: row.source}})"
        f"-[r:{edge_type}]->(b:{target_label} {{id: row.target}}) "
        "DELETE r RETURN count(*) AS removed"
    )


def _delete_clauses(source: str) -> list[str]:
    """Clauses that DETACH DELETE File nodes by ``path`` and every node by ``file_path``.

    ``OPTIONAL MATCH`` keeps one row alive when nothing matches (deleting ``null`` is a no-op in
    both backends), so the statement goes on to the next label; ``count`` carries the numbers.

    Args:
        source: ``"$path"`` for one file, or ``"p"`` after ``UNWIND $paths AS p``.
    """
    clauses: list[str] = []
    carried: list[str] = []
    for i, label in enumerate(NODE_LABELS):
        prop = FILE_PATH_PROPERTY[label]
        unwind = "UNWIND $paths AS p " if source == "p" else ""
        keep = "".join(f"{name}, " for name in carried)
        clauses.append(
            f"{unwind}OPTIONAL MATCH (n{i}:{label} {{{prop}: {source}}}) DETACH DELETE n{i} "
            f"WITH {keep}count(n{i}) AS deleted_{i}"
        )
        carried.append(f"deleted_{i}")
    clauses.append("WITH " + " + ".join(carried) + " AS deleted")
    return clauses


def _keep_clauses(gone_labels: Sequence[str]) -> list[str]:
    """Clauses that write a file's subgraph over what the graph holds of it: DETACH DELETE the
    nodes of ``$gone_<Label>`` (by ``id``), and delete the ``CONTAINS`` relationships into the
    file's other nodes (written again with the file's subgraph: a node's container can change
    while its id stays). The nodes kept, the ``File`` node among them, keep every other
    relationship, cross-file ones included.

    Args:
        gone_labels: Labels with ids to delete (whitelisted); an empty list is left out (an
            ``UNWIND`` of nothing would end the statement).
    """
    clauses = ["WITH 0 AS deleted_none"]  # (the counts carried from clause to clause start here)
    carried = ["deleted_none"]
    for i, label in enumerate(gone_labels):
        check_label(label)
        keep = "".join(f"{name}, " for name in carried)
        clauses.append(f"UNWIND $gone_{label} AS g OPTIONAL MATCH (g{i}:{label} {{id: g}}) DETACH DELETE g{i} "
                       f"WITH {keep}count(g{i}) AS deleted_{i}")
        carried.append(f"deleted_{i}")
    keep = "".join(f"{name}, " for name in carried)
    for i, label in enumerate(SYMBOL_LABELS):
        clauses.append(f"UNWIND $paths AS p OPTIONAL MATCH ()-[c{i}:CONTAINS]->(:{label} {{file_path: p}}) DELETE c{i} "
                       f"WITH {keep}count(c{i}) AS unlinked_{i}")
    clauses.append("WITH " + " + ".join(carried) + " AS deleted")
    return clauses


DELETE_FILES: Final[str] = " ".join([*_delete_clauses("p"), "RETURN deleted"])
"""Delete the File nodes with the given paths and every node whose ``file_path`` is one of them.

Parameters: ``$paths``: a non-empty list of repo-relative paths (an empty list returns no row).
Returns one row ``deleted`` (nodes deleted).
"""


def replace_file_query(
    node_labels: Sequence[str],
    edge_groups: Sequence[tuple[str, str, str]],
    gone_labels: Sequence[str] | None = None,
) -> str:
    """One statement that replaces the subgraphs of one or more files.

    It deletes the ``File`` nodes whose ``path`` is in ``$paths`` and every node whose
    ``file_path`` is in ``$paths`` (DETACH, so their relationships go too), then merges the new nodes and
    relationships. Being one statement, it is atomic on FalkorDB (one query runs under the graph's
    write lock and is applied, replicated and logged to the AOF as a unit) and on Neo4j (one
    transaction).

    Parameters:

    * ``$paths``: the repo-relative paths (non-empty).
    * ``$nodes_<Label>``: list of ``{id, props}`` for each label in ``node_labels``.
    * ``$edges_<i>``: list of ``{source, target, props}`` for edge group ``i``.

    Relationship endpoints are ``MERGE``d by label and ``id`` inside ``FOREACH`` (which, unlike
    ``MATCH``, keeps the single row alive), so callers must drop relationships whose endpoints
    are neither in the batch nor already in the graph; otherwise a bare endpoint node would be
    created.

    With ``gone_labels`` (a file's subgraph written over, ``_keep_clauses``), only the nodes in
    ``$gone_<Label>`` go: the other nodes of the files (their ``File`` nodes too) stay with their
    relationships, their properties set to ``row.props`` (which then holds ``id`` too) and their
    ``CONTAINS`` relationships written again.

    Args:
        node_labels: Labels that have nodes in the batch (whitelisted).
        edge_groups: ``(type, source_label, target_label)`` per relationship group (whitelisted).
        gone_labels: Labels with ids in ``$gone_<Label>``; None to delete the files' nodes whole.

    Returns:
        The statement (returns one row ``deleted``).
    """
    parts = _delete_clauses("p") if gone_labels is None else _keep_clauses(gone_labels)
    assign = "+=" if gone_labels is None else "="
    for label in node_labels:
        check_label(label)
        parts.append(f"FOREACH (row IN $nodes_{label} | MERGE (n:{label} {{id: row.id}}) SET n {assign} row.props)")
    for i, (edge_type, source_label, target_label) in enumerate(edge_groups):
        check_edge_type(edge_type)
        check_label(source_label)
        check_label(target_label)
        parts.append(
            f"FOREACH (row IN $edges_{i} | "
            f"MERGE (a:{source_label} {{id: row.source}}) "
            f"MERGE (b:{target_label} {{id: row.target}}) "
            f"MERGE (a)-[r:{edge_type}]->(b) SET r += row.props)"
        )
    parts.append("RETURN deleted")
    return " ".join(parts)


# --------------------------------------------------------------------------------------------
# Reads used by the stores themselves
# --------------------------------------------------------------------------------------------


def locate_ids_query(label: str) -> str:
    """Which of the given ids exist as nodes of ``label``, with the file each belongs to.

    Parameters: ``$ids``: list of ids. Returns rows ``id``, ``file_key`` (``path`` for File,
    ``file_path`` otherwise).

    Args:
        label: Node label (whitelisted).

    Returns:
        The statement.
    """
    check_label(label)
    prop = FILE_PATH_PROPERTY.get(label)  # type: ignore[call-overload]
    file_key = f"n.{prop}" if prop else "null"
    return f"UNWIND $ids AS id MATCH (n:{label} {{id: id}}) RETURN n.id AS id, {file_key} AS file_key"


def delete_nodes_query(label: str) -> str:
    """Delete nodes of one label by id, with their relationships (memory nodes; code nodes go
    by file through :data:`DELETE_FILES`).

    Parameters: ``$ids``: list of ids. Returns one row ``deleted``.

    Args:
        label: Node label (whitelisted).

    Returns:
        The statement.
    """
    check_label(label)
    return (
        f"UNWIND $ids AS id MATCH (n:{label} {{id: id}}) "
        "WITH n, n.id AS gone DETACH DELETE n RETURN count(gone) AS deleted"
    )


def count_nodes_query(label: str) -> str:
    """Count the nodes of one label (returns one row ``n``)."""
    check_label(label)
    return f"MATCH (n:{label}) RETURN count(n) AS n"


def count_edges_query(edge_type: str) -> str:
    """Count the relationships of one type (returns one row ``n``)."""
    check_edge_type(edge_type)
    return f"MATCH ()-[r:{edge_type}]->() RETURN count(r) AS n"


def node_ids_query(label: str) -> str:
    """All ids of one label (returns rows ``id``)."""
    check_label(label)
    return f"MATCH (n:{label}) RETURN n.id AS id"


PING: Final[str] = "RETURN 1 AS ok"
"""Health-check query."""

NEO4J_AWAIT_INDEXES: Final[str] = "CALL db.awaitIndexes(300)"
"""Neo4j: wait (up to 300 s) until every index is online after :func:`neo4j_schema_statements`."""


def one_hop_query(start_label: str, edge_types: Sequence[str], direction: str) -> str:
    """Read query: the neighbours of the ``$ids`` nodes (all labelled ``start_label``) one hop away.

    Used hop by hop for breadth-first walks: the cost stays proportional to the nodes and edges
    reached, where a variable-length pattern enumerates every path (hubs made 3-hop walks ~80 ms
    at 100k nodes). Parameters ``$ids``, ``$limit``. Returns ``source, id, labels, name,
    qualified_name, file_path, start_line, kind, rel, outgoing`` (``outgoing``: the edge points
    from the source node to ``id``).
    """
    check_label(start_label)
    for edge_type in edge_types:
        check_edge_type(edge_type)
    types = ":" + "|".join(edge_types) if edge_types else ""
    arrow = {"outgoing": f"-[r{types}]->", "incoming": f"<-[r{types}]-", "both": f"-[r{types}]-"}.get(direction)
    if arrow is None:
        raise ValueError("direction must be outgoing, incoming or both")
    return (
        f"UNWIND $ids AS source MATCH (a:{start_label} {{id: source}}){arrow}(n) "
        "RETURN DISTINCT source, n.id AS id, labels(n) AS labels, n.name AS name, "
        "n.qualified_name AS qualified_name, coalesce(n.file_path, n.path) AS file_path, "
        "n.start_line AS start_line, n.kind AS kind, type(r) AS rel, startNode(r) = a AS outgoing "
        "ORDER BY file_path, start_line, id LIMIT $limit"
    )


def callers_and_callees_query(start_label: str) -> str:
    """Read query: callers and callees of ``$id`` (one hop of CALLS), at most ``$limit`` rows.

    Returns ``role`` (``caller``/``callee``), ``id, qualified_name, file_path, start_line,
    line_number``.
    """
    check_label(start_label)
    return (
        f"MATCH (s:{start_label} {{id: $id}})-[r:CALLS]-(n) "
        "RETURN CASE WHEN startNode(r) = s THEN 'callee' ELSE 'caller' END AS role, n.id AS id, "
        "n.qualified_name AS qualified_name, n.file_path AS file_path, n.start_line AS start_line, "
        "r.line_number AS line_number ORDER BY role, file_path, start_line LIMIT $limit"
    )
