"""The pipeline's Dagster definitions, wired to whatever stores the caller gives them.

The pipeline does not open the project's stores itself (that needs the query server's owner
rule), so there is no module-level ``defs`` here: the code location
``query_server.dagster_location:defs`` composes ``build_definitions`` with a resource over a
``ProjectHandle``, and ``codemem index`` (``pipelines.dagster.run``) runs the same assets with
``pipeline_resources`` over the stores its process owns.
"""

from __future__ import annotations

from typing import Any

from dagster import Definitions

from pipelines.dagster.assets import CODE_INDEX_ASSETS, CODE_INDEX_CHECKS
from pipelines.dagster.design_assets import DESIGN_ASSETS
from pipelines.dagster.index_job import codemem_index_job
from pipelines.dagster.resources import BucketIOManager
from pipelines.dagster.sensors import file_change_sensor, index_buckets_job


def pipeline_resources(codemem: Any, io_dir: str = "") -> dict[str, Any]:
    """The resources the assets require.

    Args:
        codemem: The ``codemem`` resource: a ``pipelines.dagster.project.ProjectStores``, or a
            Dagster resource that yields one for each run.
        io_dir: Where ``bucket_io`` keeps stage outputs ('' = the code location project's
            ``<state>/dagster/io``).
    """
    return {"codemem": codemem, "bucket_io": BucketIOManager(base_dir=io_dir)}


def build_definitions(codemem: Any, io_dir: str = "", index_source: Any = None) -> Definitions:
    """The code index and design assets, their checks, the bucket job, the file-change sensor and,
    given an ``index_source`` (``pipelines.dagster.index_job.IndexSource``), the
    ``codemem_index`` job, over the ``codemem`` resource given (see ``pipeline_resources``)."""
    resources = pipeline_resources(codemem, io_dir)
    jobs: list[Any] = [index_buckets_job]
    if index_source is not None:
        resources["index_source"] = index_source
        jobs.append(codemem_index_job)
    return Definitions(
        assets=[*CODE_INDEX_ASSETS, *DESIGN_ASSETS],
        asset_checks=CODE_INDEX_CHECKS,
        jobs=jobs,
        sensors=[file_change_sensor],
        resources=resources,
    )
