"""Many tool calls at once, reads and index writes mixed, through the owner and a second process's handle."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pipelines.indexer import CODE_COLLECTION
from query_server.ownership import ProjectHandle
from resources.schemas.tools import (
    CodeSearchInput,
    GetRelatedInput,
    GraphQueryInput,
    IndexFileInput,
    IndexInput,
)
from resources.settings import Settings
from tests.conftest import write_files

FILES = {
    f"svc/module_{i}.py": (
        f"def handler_{i}(request):\n"
        f"    \"\"\"Handle request number {i}.\"\"\"\n"
        f"    return helper_{i}(request)\n\n\n"
        f"def helper_{i}(request):\n"
        f"    return request.body\n"
    )
    for i in range(20)
}


def test_hundred_concurrent_calls_with_index_writes(project: Path) -> None:
    write_files(project, FILES)
    owner = ProjectHandle(Settings(project_root=project))
    try:
        owner.call("index", IndexInput())

        def call(n: int):
            kind = n % 5
            if kind == 0:
                path = project / f"svc/module_{n % 20}.py"
                path.write_text(FILES[f"svc/module_{n % 20}.py"] + f"\n# edit {n}\n")
                return owner.call("index_file", IndexFileInput(file_path=f"svc/module_{n % 20}.py"))
            if kind == 1:
                return owner.call("graph_query", GraphQueryInput(cypher="MATCH (f:Function) RETURN count(f) AS n"))
            if kind == 2:
                return owner.call("get_related", GetRelatedInput(entity_id=f"svc.module_{n % 20}.handler_{n % 20}", direction="outgoing"))
            return owner.call("code_search", CodeSearchInput(query=f"handle request number {n % 20}", limit=5))

        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(call, range(100)))
        assert len(results) == 100
        assert all(r.results for r in results[3::5]), "every search found something"
        # a second handle (another process would connect the same way) sees a consistent index
        other = ProjectHandle(Settings(project_root=project))
        try:
            assert not other.is_owner
            assert other.call("index_status").symbols == 40
        finally:
            other.close()
        service = owner.backend
        manifest_ids = {s.id for s in service.manifest.all_symbols()}
        assert manifest_ids == service.vectors.ids(CODE_COLLECTION)
        assert manifest_ids == service.graph.node_ids("Function")
        calls = owner.call("graph_query", GraphQueryInput(cypher="MATCH (:Function)-[r:CALLS]->(:Function) RETURN count(r) AS n"))
        assert calls.results == [{"n": 20}]
    finally:
        owner.close()
