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
