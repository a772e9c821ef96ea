"""The heap trimmer: it gives freed memory back for real, only after work, never mid-call."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from query_server.foreground import ForegroundGate
from query_server.heap_trim import HeapTrimmer, load_malloc_trim
from query_server.ownership import ProjectHandle
from resources.schemas.tools import CodeSearchInput, IndexInput
from resources.settings import Settings
from tests.conftest import write_files

REPO_ROOT = Path(__file__).parents[2]
needs_glibc = pytest.mark.skipif(load_malloc_trim() is None, reason="no malloc_trim in this C library (not glibc)")

# Worker threads (as the server's pool) fill their arenas with 1 KB buffers (malloc, not Python's
# small-object allocator), free all but one in 64 (the kept ones pin the heap: it cannot shrink
# from its top), then one trim_if_due. Prints RssAnon in kB: after the fill, after the free, after
# the trim.
FRAGMENT_AND_TRIM = textwrap.dedent("""
    import threading
    from pathlib import Path
    from query_server.foreground import ForegroundGate
    from query_server.heap_trim import HeapTrimmer

    def anon_kb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

    kept, lists = [], []
    def work():
        blocks = [bytearray(1024) for _ in range(60_000)]
        kept.extend(blocks[::64])
        lists.append(blocks)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    filled = anon_kb()
    lists.clear()
    freed = anon_kb()
    gate = ForegroundGate()
    trimmer = HeapTrimmer(gate)
    with gate.serving():
        pass
    assert trimmer.trim_if_due()
    print(filled, freed, anon_kb(), len(kept))
""")


@needs_glibc
def test_a_trim_gives_freed_heap_memory_back_to_the_system() -> None:
    done = subprocess.run([sys.executable, "-c", FRAGMENT_AND_TRIM], capture_output=True, text=True,
                          cwd=str(REPO_ROOT), timeout=120, check=True)
    filled, freed, trimmed, _kept = map(int, done.stdout.strip().splitlines()[-1].split())  # after the log line
    # ~240 MB of buffers: freeing them keeps most of it resident (the allocator holds it) ...
    assert freed > 0.8 * filled, (filled, freed)
    # ... the trim returns it: what stays is the interpreter plus the 1/64 kept.
    assert trimmed < 0.5 * freed, (filled, freed, trimmed)


def test_it_trims_only_after_work_and_never_while_a_call_is_in_flight() -> None:
    calls: list[int] = []
    gate = ForegroundGate()
    trimmer = HeapTrimmer(gate, trim=lambda pad: calls.append(pad) or 1)
    assert not trimmer.trim_if_due(), "nothing happened yet: nothing to trim"
    with gate.serving():
        assert not trimmer.trim_if_due(), "no trim during a call"
    assert trimmer.trim_if_due() and calls == [0]
    assert not trimmer.trim_if_due(), "no work since the last trim"
    gate.pause_for_foreground()  # a background index step is work too
    assert trimmer.trim_if_due() and trimmer.trims == 2 and trimmer.trim_seconds >= 0


def test_a_failing_trim_stops_the_thread_and_not_the_process() -> None:
    gate = ForegroundGate()
    failed = threading.Event()

    def broken(_pad: int) -> int:
        failed.set()
        raise OSError("simulated")

    trimmer = HeapTrimmer(gate, interval_s=0.01, trim=broken)
    with gate.serving():
        pass
    trimmer.start()
    assert failed.wait(5)
    trimmer.stop()
    assert not trimmer._thread.is_alive()


def test_an_interval_of_zero_disables_it() -> None:
    gate = ForegroundGate()
    trimmer = HeapTrimmer(gate, interval_s=0, trim=lambda _pad: 1)
    trimmer.start()
    assert not trimmer.enabled and trimmer._thread is None


@needs_glibc
def test_the_owner_runs_a_trimmer_and_stops_it_on_close(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMEM_HEAP_TRIM_INTERVAL_S", "0.05")
    write_files(project, {"pkg/mod.py": "def add(a, b):\n    return a + b\n"})
    handle = ProjectHandle(Settings(project_root=project))
    try:
        assert handle.is_owner and handle._trimmer is not None and handle._trimmer.interval_s == 0.05
        handle.call("index", IndexInput())
        handle.call("code_search", CodeSearchInput(query="add two numbers"))
        for _ in range(100):
            if handle._trimmer.trims:
                break
            time.sleep(0.05)
        assert handle._trimmer.trims >= 1, "the owner's trimmer did not trim after a served call"
    finally:
        handle.close()
    assert not handle._trimmer._thread.is_alive()
