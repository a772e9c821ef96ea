"""The Dagster code location of codemem: ``query_server.dagster_location:defs``.

It serves one project: ``CODEMEM_PROJECT_ROOT`` (``codemem ui --project PATH`` sets it), whose
state dir holds the stores and, under ``dagster/``, the run storage (``dagster.yaml``). This is
the one place where the pipeline's definitions (``pipelines.dagster.definitions``) meet the
stores: each run opens the project as this process's owner rule says, through ``CodememProject``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from pipelines.dagster.definitions import build_definitions
from pipelines.dagster.project import ProjectStores
from pipelines.dagster.resources import RUN_PID_TAG, project_settings
from pipelines.dagster.run import LocalIndexSource
from pipelines.design.derive import DesignStores
from pipelines.indexer import IndexContext
from query_server.ownership import ProjectHandle
from query_server.service import INDEX_RUN, CodeMemService
from query_server.tools import TOOLS
from resources.schemas.tools import IndexInput
from resources.settings import Settings


class CodememProject(ConfigurableResource, ProjectStores):
    """The project's stores for the length of a run (the ``codemem`` resource).

    The run opens the project once: if no other process owns its embedded stores, the run owns
    them and the assets write through them; if another codemem process owns them (an MCP server
    of a Claude Code session), the assets hand their work to it. Ownership is looked up on each
    call, since a run whose owner went away takes the stores over.
    """

    project_root: str = ""
    _handle: ProjectHandle | None = PrivateAttr(default=None)
    _alone: contextlib.ExitStack | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Open the project (own its stores, or reach their owner) and tag the run with this pid."""
        self._handle = ProjectHandle(self.settings())
        service = self._service()
        if service is not None and service.settings.shared_stores:
            # no owner: the run is the project's one index run for its length, as any other is
            self._alone = contextlib.ExitStack()
            try:
                self._alone.enter_context(service.manifest.alone(INDEX_RUN, stop=service._stop, guard=True))  # noqa: SLF001
            except BaseException:
                self._handle.close()
                self._handle = None
                raise
        run = context.run
        if context.instance is not None and run is not None:
            # lets fail_orphaned_runs tell a run whose process was killed from one still going
            context.instance.add_run_tags(run.run_id, {RUN_PID_TAG: str(os.getpid())})

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        """Close the stores (or the connection to their owner)."""
        if self._alone is not None:
            self._alone.close()
            self._alone = None
        if self._handle is not None:
            self._handle.close()
        self._handle = None

    def _opened(self) -> ProjectHandle:
        if self._handle is None:
            raise RuntimeError("the codemem resource is used outside a Dagster run (nothing opened the project)")
        return self._handle

    def _service(self) -> CodeMemService | None:
        """This process's service when it owns the stores."""
        backend = self._opened().backend
        return backend if isinstance(backend, CodeMemService) else None

    def settings(self) -> Settings:
        """The project's settings."""
        return project_settings(self.project_root)

    def index_context(self) -> IndexContext | None:
        """See ``ProjectStores.index_context``."""
        service = self._service()
        return service.owned_stores().index_context() if service is not None else None

    def design_stores(self) -> DesignStores | None:
        """See ``ProjectStores.design_stores``."""
        service = self._service()
        return service.owned_stores().design_stores() if service is not None else None

    def index_on_owner(self, request: IndexInput) -> dict[str, Any]:
        """See ``ProjectStores.index_on_owner``."""
        return self._opened().call(TOOLS["index"], request)

    def refresh_design_on_owner(self) -> dict[str, Any]:
        """See ``ProjectStores.refresh_design_on_owner``."""
        return self._opened().call(TOOLS["refresh_design"])

    def index_run_on_owner(self, embed: bool) -> dict[str, Any]:
        """See ``ProjectStores.index_run_on_owner``."""
        return self._opened().call(TOOLS["index_run"], IndexInput(embed=embed))


class CodememIndexSource(ConfigurableResource):
    """The ``codemem_index`` job's messages in the code location (a sensor run, or one launched
    from the UI): the index runs inside the op when this run owns the stores; otherwise the owner
    indexes and sends back the same messages (each touched bucket with its own files, the checks,
    normalized_graph, the design assets), which this run records."""

    codemem: CodememProject

    def messages(self, embed: bool, force: bool) -> Iterator[dict[str, Any]]:
        """See ``pipelines.dagster.index_job.IndexSource``."""
        if self.codemem.index_context() is not None:
            yield from LocalIndexSource(self.codemem, lambda *_: None).messages(embed, force)
            return
        outcome = self.codemem.index_run_on_owner(embed)
        yield from outcome["messages"]
        yield {"kind": "end", "error": None}


_project = CodememProject()
defs = build_definitions(_project, index_source=CodememIndexSource(codemem=_project))
