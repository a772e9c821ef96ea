"""Run tags codemem sets (a module without Dagster: ``codemem index`` names them before Dagster loads)."""

RUN_PID_TAG = "codemem/pid"
"""Run tag holding the pid of the process that executes the run."""

TRIGGER_TAG = "codemem/trigger"
"""Run tag naming what started the run (``codemem index``, ``file_change_sensor``)."""

CODE_LOCATION = "codemem"
"""The code location that serves codemem's jobs (``codemem ui``'s workspace names it so). A run
recorded in another process names it as its origin: the UI re-executes a run through its
origin's code location."""
