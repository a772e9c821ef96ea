"""What the Dagster assets need of the project they index: the ``codemem`` resource's interface.

A run either owns the project's embedded stores — then ``index_context`` and ``design_stores``
give them and the assets write through the indexing stages — or another codemem process owns
them (an MCP server of a Claude Code session): the embedded stores cannot be opened twice, so
the assets hand their work to that owner (``index_on_owner``, ``refresh_design_on_owner``,
``index_run_on_owner``) and record what it did.

The pipeline only declares this interface. The query server implements it: over a
``ProjectHandle`` for the code location (``query_server.dagster_location``), and over its own
stores for the in-process ``codemem index`` run (``OwnedStores``, built by the service).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from pipelines.design.derive import DesignStores
from pipelines.indexer import IndexContext
from resources.manifest import Manifest, open_manifest
from resources.schemas.tools import IndexInput
from resources.settings import Settings


class ProjectStores(ABC):
    """The project's stores as the assets see them for the length of a run."""

    @abstractmethod
    def settings(self) -> Settings:
        """The project's settings."""

    @abstractmethod
    def index_context(self) -> IndexContext | None:
        """The code index's stores when this run owns them; None when another process does."""

    @abstractmethod
    def design_stores(self) -> DesignStores | None:
        """The design step's stores when this run owns them; None when another process does."""

    @abstractmethod
    def index_on_owner(self, request: IndexInput) -> dict[str, Any]:
        """Have the process that owns the stores index ``request``'s files; returns its report."""

    @abstractmethod
    def refresh_design_on_owner(self) -> dict[str, Any]:
        """Have the process that owns the stores refresh the design layer; returns its report."""

    @abstractmethod
    def index_run_on_owner(self, embed: bool) -> dict[str, Any]:
        """Have the process that owns the stores index what changed as a ``codemem_index`` run
        would; returns ``{"messages": the run's messages but its end, "report": its report}``
        (``pipelines.dagster.index_job.IndexSource``), for this run to record."""

    def manifest(self) -> Manifest:
        """The manifest to plan against: the owned one, or a connection to the file (the owner's
        writes are committed, so a second reader sees them)."""
        ctx = self.index_context()
        if ctx is not None:
            return ctx.manifest
        return open_manifest(self.settings())


class OwnedStores(ProjectStores):
    """Stores this process owns and lends to an in-process run (``codemem index``).

    The run writes through them directly; there is never an owner to hand work to.
    """

    def __init__(self, ctx: IndexContext, design_stores: Callable[[], DesignStores]) -> None:
        """Lend ``ctx`` and the design stores ``design_stores()`` builds (per call, as the
        owner's memory scopes may change between runs)."""
        self._ctx = ctx
        self._design_stores = design_stores

    def settings(self) -> Settings:
        """The project's settings."""
        return self._ctx.settings

    def index_context(self) -> IndexContext:
        """The owned code index stores."""
        return self._ctx

    def design_stores(self) -> DesignStores:
        """The owned design stores."""
        return self._design_stores()

    def index_on_owner(self, request: IndexInput) -> dict[str, Any]:
        """Never needed: this process is the owner."""
        raise RuntimeError("this process owns the project's stores: there is no other owner to hand the index to")

    def refresh_design_on_owner(self) -> dict[str, Any]:
        """Never needed: this process is the owner."""
        raise RuntimeError("this process owns the project's stores: there is no other owner to hand the design step to")

    def index_run_on_owner(self, embed: bool) -> dict[str, Any]:
        """Never needed: this process is the owner."""
        raise RuntimeError("this process owns the project's stores: there is no other owner to hand the index run to")
