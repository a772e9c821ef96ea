"""Run tags codemem sets (a module without Dagster: ``codemem index`` names them before Dagster loads)."""

RUN_PID_TAG = "codemem/pid"
"""Run tag holding the pid of the process that executes the run."""

TRIGGER_TAG = "codemem/trigger"
"""Run tag naming what started the run (``codemem index``, ``file_change_sensor``)."""
