"""Choose the code-graph backend from the settings."""

from __future__ import annotations

from resources.graph.store import GraphStore
from resources.settings import Settings

GRAPH_DIRNAME = "graph"
"""Sub-directory of the state dir that holds the embedded graph."""


def create_graph_store(settings: Settings) -> GraphStore:
    """Open the graph store the settings ask for.

    Neo4j when ``settings.neo4j_uri`` (``NEO4J_URI``) is set, else embedded FalkorDB under
    ``<state dir>/graph``. The embedded store starts a child ``redis-server`` on first use
    (``resources.graph.lazy``); only one process may own it at a time (the caller arranges that).

    Args:
        settings: codemem settings.

    Returns:
        An open store; call ``ensure_schema()`` before the first write and ``close()`` at the end.

    Raises:
        GraphUnavailable: If the embedded database cannot be started.
    """
    if settings.neo4j_uri:
        from resources.graph.neo4j_store import Neo4jGraphStore

        password = settings.neo4j_password.get_secret_value() if settings.neo4j_password else None
        return Neo4jGraphStore(settings.neo4j_uri, settings.neo4j_user, password)
    from resources.graph.lazy import LazyGraphStore

    db_dir = (settings.resolved_state_dir() / GRAPH_DIRNAME).expanduser().resolve()

    def start() -> GraphStore:
        from resources.graph.falkor import FalkorGraphStore

        return FalkorGraphStore(db_dir)

    def load() -> None:
        from resources.graph.falkor_server import import_falkordblite

        import resources.graph.falkor  # noqa: F401 - redis-py, psutil, the graph model
        import_falkordblite()

    return LazyGraphStore(start, db_dir, backend="falkordb", load=load)  # type: ignore[return-value]
