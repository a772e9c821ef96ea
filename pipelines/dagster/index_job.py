"""The ``codemem_index`` job: one run per ``codemem index``, recording per bucket what it did.

Its one op, ``index_changes``, takes the messages of an index run from its ``index_source``
resource and turns each into the Dagster event the UI shows: a touched bucket becomes a
materialization of ``source_files``, ``parsed_files``, ``embedded_symbols`` and ``graph_loaded``
for that bucket's partition alone, with that bucket's own files; ``normalized_graph`` and the
design assets get one materialization each, the index checks one evaluation each. A bucket the
run did not touch is not materialized again, so it keeps its last real record.

The run costs Dagster one event per record, not one run per partition range: a five-file edit
is ~30 events. The source is either the index run itself, in this process
(``pipelines.dagster.run``), or the stream a ``codemem index`` process sends to its recorder
(``pipelines.dagster.recorder``), which prepares Dagster while the index runs.

This module imports nothing but Dagster and ``pipelines.dagster.tags``: the recorder process starts on it.
"""


import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetKey,
    AssetMaterialization,
    Config,
    Failure,
    MetadataValue,
    OpExecutionContext,
    ResourceParam,
    in_process_executor,
    job,
    op,
)

from pipelines.dagster.tags import CODE_LOCATION

JOB_NAME = "codemem_index"


class IndexRunConfig(Config):
    """Options of an index run."""

    embed: bool = True
    """Compute dense vectors now (else the query server fills them in the background)."""
    force: bool = False
    """Re-process every file, changed or not."""


class IndexSource(Protocol):
    """Where the op's messages come from (see the module docstring)."""

    def messages(self, embed: bool, force: bool) -> Iterator[dict[str, Any]]:
        """The run's messages, in order, each a JSON object with a ``kind``:

        - ``bucket``: ``{"bucket": key, "assets": {asset name: metadata}}``;
        - ``asset``: ``{"asset": name, "metadata": {...}}`` (unpartitioned);
        - ``check``: ``{"asset": name, "check": name, "passed": bool, "metadata": {...}, "severity": "ERROR"|"WARN"}``;
        - ``end``: ``{"error": None | message}``, last.
        """
        ...


def metadata_values(metadata: dict[str, Any]) -> dict[str, Any]:
    """JSON metadata as Dagster metadata: ``{"md": text}`` is Markdown, ``{"json": value}`` JSON."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, dict) and "md" in value:
            out[key] = MetadataValue.md(value["md"])
        elif isinstance(value, dict) and "json" in value:
            out[key] = MetadataValue.json(value["json"])
        else:
            out[key] = value
    return out


@op(out={}, description="Index what changed since the last run (the plain indexing functions) and record, for each bucket "
                "it touched, that bucket's files as its partition of the code-index assets.")
def index_changes(
    context: OpExecutionContext, config: IndexRunConfig, index_source: ResourceParam[IndexSource]
) -> Iterator[AssetMaterialization]:
    """Turn the source's messages into materializations and check evaluations."""
    buckets = 0
    ended = False
    for message in index_source.messages(config.embed, config.force):
        kind = message.get("kind")
        if kind == "bucket":
            buckets += 1
            for asset, metadata in message["assets"].items():
                yield AssetMaterialization(asset_key=asset, partition=message["bucket"], metadata=metadata_values(metadata))
        elif kind == "asset":
            yield AssetMaterialization(asset_key=message["asset"], metadata=metadata_values(message["metadata"]))
        elif kind == "check":
            severity = AssetCheckSeverity.WARN if message.get("severity") == "WARN" else AssetCheckSeverity.ERROR
            context.log_event(AssetCheckEvaluation(
                asset_key=AssetKey(message["asset"]), check_name=message["check"], passed=bool(message["passed"]),
                metadata=metadata_values(message.get("metadata", {})), severity=severity,
            ))
        elif kind == "end":
            ended = True
            if message.get("error"):
                raise Failure(description=str(message["error"]))
            break
    if not ended:
        raise Failure(description="the index run stopped before its end (its process went away): run `codemem index` again")
    context.log.info(f"recorded {buckets} touched bucket(s)")


@job(name=JOB_NAME, executor_def=in_process_executor,
     description="`codemem index`: index what changed and record each touched bucket's files as its partition.")
def codemem_index_job() -> None:
    """One op: ``index_changes``."""
    index_changes()


def run_index_job(
    instance: Any, source: IndexSource, *, embed: bool, force: bool, tags: dict[str, str], run_id: str | None = None,
) -> dict[str, Any]:
    """Execute ``codemem_index`` in this process over ``source``'s messages (after freeing the run
    queue of runs whose process died), as a run of ``CODE_LOCATION``'s ``codemem_index`` that the
    UI can re-execute there (``run_id`` names it, else Dagster does); returns ``{"run_id",
    "success", "error"}``."""
    from pipelines.dagster.resources import fail_orphaned_runs

    fail_orphaned_runs(instance)
    with _runs_created_as_the_code_locations(instance):
        result = codemem_index_job.execute_in_process(
            instance=instance, resources={"index_source": source},
            run_config={"ops": {"index_changes": {"config": {"embed": embed, "force": force}}},
                        "loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            tags=tags, raise_on_error=False, run_id=run_id,
        )
    error = None
    if not result.success:
        failure = next((e for e in result.all_events if e.is_failure), None)
        data = failure.event_specific_data if failure is not None else None
        error = data.error.message.strip() if data is not None and getattr(data, "error", None) else "see the Dagster run"
    return {"run_id": result.run_id, "success": result.success, "error": error}


@contextmanager
def _runs_created_as_the_code_locations(instance: Any) -> Iterator[None]:
    """While inside: the runs ``instance`` creates name ``CODE_LOCATION``'s ``codemem_index`` as
    their origin (``execute_in_process`` creates its run with none)."""
    from dagster._core.definitions.repository_definition.valid_definitions import (
        SINGLETON_REPOSITORY_NAME,
    )
    from dagster._core.remote_origin import (
        RegisteredCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )

    origin = RemoteJobOrigin(RemoteRepositoryOrigin(RegisteredCodeLocationOrigin(CODE_LOCATION), SINGLETON_REPOSITORY_NAME), JOB_NAME)
    instance.create_run_for_job = functools.partial(instance.create_run_for_job, remote_job_origin=origin)
    try:
        yield
    finally:
        del instance.create_run_for_job  # the instance's own method again
