"""The Dagster code location of codemem: ``pipelines.dagster.definitions:defs``.

It serves one project: ``CODEMEM_PROJECT_ROOT`` (``codemem ui --project PATH`` sets it), whose
state dir holds the stores and, under ``dagster/``, the run storage (``dagster.yaml``).
"""

from __future__ import annotations

from dagster import Definitions

from pipelines.dagster.assets import CODE_INDEX_ASSETS, CODE_INDEX_CHECKS
from pipelines.dagster.design_assets import DESIGN_ASSETS
from pipelines.dagster.sensors import file_change_sensor, index_buckets_job
from pipelines.dagster.resources import BucketIOManager, CodememProject

defs = Definitions(
    assets=[*CODE_INDEX_ASSETS, *DESIGN_ASSETS],
    asset_checks=CODE_INDEX_CHECKS,
    jobs=[index_buckets_job],
    sensors=[file_change_sensor],
    resources={"codemem": CodememProject(), "bucket_io": BucketIOManager()},
)
