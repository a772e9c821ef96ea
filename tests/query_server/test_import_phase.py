"""``codemem mcp`` imports with the garbage collector off, then freezes what it imported."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from query_server.import_phase import begin_import_phase, end_import_phase


def test_collection_is_off_during_the_phase_and_back_on_with_the_imports_frozen() -> None:
    code = (
        "import gc\n"
        "from query_server.import_phase import begin_import_phase, end_import_phase\n"
        "begin_import_phase(); assert not gc.isenabled()\n"
        "import json, email.parser\n"
        "end_import_phase(); assert gc.isenabled() and gc.get_freeze_count() > 0\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])  # its own process: freezing is for good


def test_a_phase_in_this_process_turns_collection_back_on() -> None:
    assert gc.isenabled()
    begin_import_phase()
    end_import_phase()
    assert gc.isenabled()
    gc.unfreeze()


def test_settling_collects_garbage_then_keeps_what_lives_out_of_full_collections() -> None:
    code = (
        "import gc\n"
        "from query_server.import_phase import settle_heap\n"
        "class Node:\n"
        "    pass\n"
        "garbage = Node(); garbage.self = garbage; del garbage\n"  # a cycle only the collector frees
        "kept = [Node() for _ in range(50_000)]\n"
        "before = gc.get_freeze_count()\n"
        "settle_heap()\n"
        "assert not any(type(o).__name__ == 'Node' and hasattr(o, 'self') for o in gc.get_objects(2) + gc.get_referrers(Node))\n"
        "assert gc.get_freeze_count() >= before + 50_000, gc.get_freeze_count()\n"
        "assert not any(type(o).__name__ == 'Node' for o in gc.get_objects())\n"  # no longer walked
        "assert len(kept) == 50_000 and gc.isenabled()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])  # its own process: freezing is for good
