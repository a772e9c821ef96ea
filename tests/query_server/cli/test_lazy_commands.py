"""``codemem`` loads a command's module only when the command runs (``common.COMMAND_MODULES``):
the table matches what the modules register, a command loads nothing it does not need, and every
command is still listed, found and run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from query_server.cli import main
from query_server.cli.common import COMMAND_MODULES, load_all_commands

REPO_ROOT = Path(__file__).resolve().parents[3]


def _module(command: object) -> str:
    callback = getattr(command, "callback", None)
    return callback.__module__.rsplit(".", 1)[-1]


def test_the_table_names_the_module_of_every_command_and_subcommand() -> None:
    load_all_commands()
    assert set(main.commands) == set(COMMAND_MODULES)
    for name, command in main.commands.items():
        assert _module(command) == COMMAND_MODULES[name][0], name
        for sub_name, sub in getattr(command, "commands", {}).items():
            assert _module(sub) in COMMAND_MODULES[name], f"{name} {sub_name}"


def test_a_command_loads_its_own_module_only() -> None:
    probe = (
        "import sys\n"
        "from query_server.cli import main\n"
        "try:\n"
        "    main(['index', '--help'], prog_name='codemem')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('\\n' + __import__('json').dumps(sorted(m for m in sys.modules if m.startswith('query_server.cli.'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    loaded = {name.rsplit(".", 1)[-1] for name in json.loads(done.stdout.strip().splitlines()[-1])}
    assert "code" in loaded and "Index the repository" in done.stdout
    assert not loaded & {"design", "memory", "ui", "eval", "init", "notes", "pipeline", "repair"}, loaded


def test_every_command_is_listed_found_and_a_misspelt_one_refused() -> None:
    runner = CliRunner()
    listed = runner.invoke(main, ["--help"])
    assert listed.exit_code == 0
    for name in ("index", "memory", "ui", "validate-fix", "review", "which-partition"):
        assert name in listed.output
    health = runner.invoke(main, ["memory", "health", "--help"])  # a subcommand another module adds
    assert health.exit_code == 0, health.output
    wrong = runner.invoke(main, ["indx"])
    assert wrong.exit_code == 2 and "No such command" in wrong.output
