"""The recorder: a child process that records a ``codemem index`` run in the project's Dagster
instance while the parent indexes.

Dagster costs a 2-core machine about a second to import and open its instance. ``codemem index``
starts the recorder first, indexes with the plain functions meanwhile, and streams the run's
messages to it (JSON lines on its stdin, ``pipelines.dagster.index_job.IndexSource``); the
recorder executes the ``codemem_index`` job over them, so each touched bucket is materialized as
soon as it is written, and prints ``{"run_id", "success", "error"}`` when the run ends.

The recorder needs nothing to start: ``codemem index`` starts it before it loads anything else
(``prestart``), and the first line names the instance:
``{"kind": "start", "dagster_home": path, "tags": {...}, "embed": bool, "force": bool}``. No first
line (stdin closed: nothing changed, or another process owns the stores) means nothing to record,
and the recorder exits without a run. Stdin closing before the ``end`` message (the parent was
killed) fails the run with that reason. The recorder ignores SIGINT, so a Ctrl-C in the terminal
reaches the parent, which ends the run with what happened. What it writes on stderr is kept
for the parent's error message.

The parent names the run (``run_id`` in the start line), so once its index is done it need not
wait for Dagster: ``finish(wait_s=...)`` leaves a recorder still recording after that long to
finish the run in the background (it ignores SIGHUP: closing the terminal does not stop it), and
the run shows in the UI when it is written. A recorder that dies there leaves its run to be
marked failed by the next one (``fail_orphaned_runs``).
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from resources.processes import pid_alive

OUTCOME_FILE = "recording_outcome.json"
"""Under the Dagster home: the outcome of the last run a recorder recorded (``{"run_id",
"success", "error"}``), read by the next ``codemem index`` when it left that run to the background."""
PENDING_FILE = "recording_pending.json"
"""Under the Dagster home: the run ``codemem index`` left to its recorder to finish (``{"run_id", "pid"}``)."""
RESULT_TIMEOUT_S = 600.0
"""How long ``finish`` waits for the recorder once the parent is done."""
RECORDER_NICE = 10
"""The recorder's niceness: on a small machine its Dagster import and event writes would take
CPU from the index the user waits for; it catches up while the parent waits on I/O, and runs
at full speed once the parent has finished and waits for it."""
READY_LINE = "imported"
"""What the recorder writes on its stdout once Dagster is imported (before it reads the start line)."""
DAGSTER_IMPORT_S = 2.0
"""About how long the recorder takes to import Dagster on a 2-core machine: a shorter wait cannot
see a recorder that has not imported it yet finish, so ``finish`` does not wait for one at all."""


class StreamSource:
    """The op's messages, read from a stream of JSON lines (the recorder's stdin)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def messages(self, embed: bool, force: bool) -> Iterator[dict[str, Any]]:
        """Each line as a message, up to ``end`` or the end of the stream."""
        for line in self._stream:
            if line.strip():
                message = json.loads(line)
                yield message
                if message.get("kind") == "end":
                    return


class Recorder:
    """The parent's side: start the recorder, send it messages (never blocking the index), and
    collect the run it recorded."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._process = process
        self.run_id: str | None = None
        """The run's id once ``begin`` named it."""
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write, name="codemem-dagster-recorder", daemon=True)
        self._writer.start()
        threading.Thread(target=self._read_stderr, name="codemem-dagster-recorder-log", daemon=True).start()

    @classmethod
    def start(cls) -> Recorder:
        """Start a recorder (it imports Dagster while the caller works)."""
        process = subprocess.Popen(
            # -P: the working directory (the user's project) is not on sys.path, so none of its
            # packages can shadow codemem's
            [sys.executable, "-P", "-m", "pipelines.dagster.recorder"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        )
        return cls(process)

    def begin(self, dagster_home: str, tags: dict[str, str], *, embed: bool, force: bool) -> str:
        """Send the start line: the run, named here, is recorded in the instance at ``dagster_home``;
        returns its id."""
        self.run_id = str(uuid.uuid4())
        self.send({"kind": "start", "dagster_home": dagster_home, "tags": tags, "embed": embed, "force": force,
                   "run_id": self.run_id})
        return self.run_id

    def _read_stderr(self) -> None:
        stderr = self._process.stderr
        assert stderr is not None
        for line in stderr:
            if line.strip():
                self._stderr.append(line.rstrip())

    def send(self, message: dict[str, Any]) -> None:
        """Queue one message (written by a thread: a recorder still starting never holds the caller)."""
        self._lines.put(json.dumps(message) + "\n")

    def _write(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        broken = False
        while (line := self._lines.get()) is not None:
            if broken:
                continue
            try:
                stdin.write(line)
                stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                broken = True  # the recorder died: finish() reports it
        try:
            stdin.close()
        except (BrokenPipeError, OSError):
            pass
        self._process.stdin = None  # closed: communicate() must not flush it

    def finish(self, timeout_s: float = RESULT_TIMEOUT_S, *, wait_s: float | None = None) -> dict[str, Any]:
        """Close the stream and wait for the recorder; returns ``{"run_id", "success", "error"}``
        (``run_id`` None when it recorded no run).

        With ``wait_s``, a begun run still being recorded after that long is left to the recorder
        to finish in the background: ``{"run_id", "success": None, "error": None, "background": True}``;
        at once when the recorder is still importing Dagster and ``wait_s`` is under
        ``DAGSTER_IMPORT_S`` (waiting could only see it go on).
        """
        self._lines.put(None)
        self._writer.join()
        if wait_s is not None and self.run_id is not None:
            if wait_s < DAGSTER_IMPORT_S and not self._imported():
                return {"run_id": self.run_id, "success": None, "error": None, "background": True}
            try:
                self._process.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                return {"run_id": self.run_id, "success": None, "error": None, "background": True}
        try:
            out, _ = self._process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.communicate()
            return {"run_id": None, "success": False, "error": f"the Dagster recorder took over {timeout_s:g} s and was stopped"}
        for line in reversed((out or "").splitlines()):
            try:
                result = json.loads(line)
            except ValueError:
                continue
            if isinstance(result, dict) and "success" in result:
                return result
        tail = self._log_tail()
        return {"run_id": None, "success": False,
                "error": f"the Dagster recorder exited with status {self._process.returncode}" + (f": {tail}" if tail else "")}

    def _imported(self) -> bool:
        """True once the recorder has written its ``READY_LINE`` (or anything, or exited): its
        stdout has something to read. Nothing is read here: ``finish`` reads it all at the end."""
        stdout = self._process.stdout
        if stdout is None:
            return True
        readable, _, _ = select.select([stdout], [], [], 0)
        return bool(readable)

    def discard(self) -> None:
        """Nothing to record: let the recorder go without a run."""
        self._lines.put(None)
        self._writer.join()
        if self._process.poll() is None:
            self._process.terminate()  # before its start line it has written nothing
        self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    @property
    def pid(self) -> int:
        """The recorder's process id."""
        return self._process.pid

    def _log_tail(self) -> str:
        return " | ".join(list(self._stderr)[-3:])[-600:]


_prestarted: Recorder | None = None


def prestart() -> None:
    """Start a recorder now, for the ``materialize_index`` of this process to take
    (``take_prestarted``); one nobody took is let go when the process exits."""
    global _prestarted
    if _prestarted is None:
        _prestarted = Recorder.start()
        atexit.register(_discard_prestarted)


def take_prestarted() -> Recorder | None:
    """The recorder ``prestart`` started, if any (each is taken once)."""
    global _prestarted
    recorder, _prestarted = _prestarted, None
    return recorder


def _discard_prestarted() -> None:
    recorder = take_prestarted()
    if recorder is not None:
        recorder.discard()


def import_dagster() -> None:
    """Import what recording a run needs (the slow part of a recorder's start)."""
    import dagster  # noqa: F401
    from dagster._core.instance.ref import InstanceRef  # noqa: F401
    from dagster._core.storage.event_log import SqliteEventLogStorage  # noqa: F401 - loaded before the start line
    from dagster._core.storage.runs import SqliteRunStorage  # noqa: F401
    from dagster._core.storage.schedules import SqliteScheduleStorage  # noqa: F401

    import pipelines.dagster.index_job  # noqa: F401


def record_run(stream: IO[str]) -> dict[str, Any] | None:
    """Execute the ``codemem_index`` job over the messages on ``stream``; None when the stream
    ended before a start line."""
    import_dagster()
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    from pipelines.dagster.index_job import run_index_job
    from pipelines.dagster.tags import RUN_PID_TAG

    line = stream.readline()
    if not line.strip():
        return None
    start = json.loads(line)
    try:
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(start["dagster_home"]))) as instance:
            result = run_index_job(instance, StreamSource(stream), embed=bool(start.get("embed")), force=bool(start.get("force")),
                                   tags={**start.get("tags", {}), RUN_PID_TAG: str(os.getpid())}, run_id=start.get("run_id"))
    except Exception as exc:  # noqa: BLE001 - the outcome says it, for a parent that may have left
        result = {"run_id": start.get("run_id"), "success": False, "error": f"{type(exc).__name__}: {exc}"}
    _write_json(Path(start["dagster_home"]) / OUTCOME_FILE, result)
    return result


def _write_json(path: Path, value: dict[str, Any]) -> None:
    """Write ``value`` to ``path`` whole or not at all (a failure to write is not the run's)."""
    try:
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(value), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass


def leave_pending(dagster_home: Path, outcome: dict[str, Any], recorder: Recorder) -> None:
    """Record that the run of ``outcome`` was left to ``recorder`` to finish in the background."""
    _write_json(dagster_home / PENDING_FILE, {"run_id": outcome["run_id"], "pid": recorder.pid})


def earlier_background_note(dagster_home: Path) -> str | None:
    """What to say of the run an earlier ``codemem index`` left to finish in the background: None
    when it was recorded (or is still being recorded, or there was none), else what went wrong."""
    pending_path = dagster_home / PENDING_FILE
    try:
        pending = json.loads(pending_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        outcome = json.loads((dagster_home / OUTCOME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        outcome = {}
    run_id = pending.get("run_id")
    if outcome.get("run_id") != run_id and pid_alive(int(pending.get("pid") or 0)):
        return None  # still recording
    pending_path.unlink(missing_ok=True)
    if outcome.get("run_id") != run_id:
        return f"Dagster run {run_id} of an earlier index, left to finish in the background, was not recorded: its recorder stopped first"
    if outcome.get("success"):
        return None
    return f"Dagster run {run_id} of an earlier index, left to finish in the background, failed: {outcome.get('error')}"


def main() -> None:
    """``python -m pipelines.dagster.recorder``: record one run, print its outcome, exit at once
    (the run's events are committed; Python's own teardown of Dagster would add half a second)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a run left to finish in the background outlives a closed terminal
    os.nice(RECORDER_NICE)
    import_dagster()
    try:
        print(READY_LINE, flush=True)  # the parent's finish() now knows a short wait may see the end
    except OSError:
        pass
    result = record_run(sys.stdin)
    try:  # a parent that left the run to finish here reads neither
        if result is not None:
            print(json.dumps(result), flush=True)
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
