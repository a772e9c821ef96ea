"""`codemem init` and the Claude Code plugin layout, checked against Claude Code's documented formats.

The models below are written from Claude Code's documentation, not from our code:
- hooks in settings files and plugin ``hooks/hooks.json``: docs.claude.com/en/docs/claude-code/hooks
  (``hooks`` → event → matcher groups → ``{"type": "command", "command", "timeout"}``, the timeout
  in seconds, ``matcher`` only for tool events) and code.claude.com/docs/en/plugins-reference (a
  plugin's hooks.json wraps the events in a top-level ``hooks`` object, with an optional
  ``description``; a file without the wrapper fails to load: "Hook load failed ... path hooks");
- ``.mcp.json``: docs.claude.com/en/docs/claude-code/mcp (``mcpServers`` → name → stdio
  ``{type?, command, args, env}`` or remote ``{type: http|sse, url, headers}``);
- ``.claude-plugin/plugin.json``: code.claude.com/docs/en/plugins/manifest-reference (``name``
  required, kebab-case; semver ``version``; ``author`` object with ``name``; component paths
  relative, starting with ``./``, no ``..``);
- ``.claude-plugin/marketplace.json``: code.claude.com/docs/en/plugins/marketplace-reference
  (``name``, ``owner.name``, ``plugins[]`` with ``name`` and ``source``; a relative source starts
  with ``./`` and resolves from the marketplace root);
- ``commands/*.md``: slash commands with YAML frontmatter (``description``, ``argument-hint``,
  ``allowed-tools``, ``model``, ``disable-model-invocation``) and ``$ARGUMENTS``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import yaml
from click.testing import CliRunner
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from query_server import claude_setup as setup
from query_server.cli import main

REPO = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------ the documented formats

HookEvent = Literal[
    "PreToolUse", "PostToolUse", "Notification", "UserPromptSubmit", "Stop", "SubagentStop",
    "PreCompact", "SessionStart", "SessionEnd",
]
DOC_TOOL_EVENTS = {"PreToolUse", "PostToolUse"}  # the events whose matcher is a tool-name pattern
CLAUDE_TOOLS = ("Read", "Edit", "MultiEdit", "Write", "Bash", "Glob", "Grep", "Task", "WebFetch", "WebSearch")
KEBAB = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
SEMVER = r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CommandHook(Strict):
    type: Literal["command"]
    command: str = Field(min_length=1)
    timeout: PositiveInt | None = None


class MatcherGroup(Strict):
    matcher: str | None = None
    hooks: list[CommandHook] = Field(min_length=1)


HooksObject = dict[HookEvent, list[MatcherGroup]]


class SettingsFile(BaseModel):  # other settings keys are the user's: allowed, untouched
    model_config = ConfigDict(extra="allow")
    hooks: HooksObject = {}


class PluginHooksFile(Strict):
    description: str | None = None
    hooks: HooksObject


class StdioServer(Strict):
    type: Literal["stdio"] | None = None
    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, str] | None = None


class RemoteServer(Strict):
    type: Literal["http", "sse"]
    url: str
    headers: dict[str, str] | None = None


class McpFile(Strict):
    mcpServers: dict[str, StdioServer | RemoteServer]


def _relative_path(value: str) -> str:
    assert value.startswith("./"), f"{value!r}: plugin paths are relative and start with ./"
    assert ".." not in value.split("/") and "\\" not in value, f"{value!r}: no .. and no backslashes"
    return value


RelPath = Annotated[str, AfterValidator(_relative_path)]


class Author(Strict):
    name: str = Field(min_length=1)
    email: str | None = None
    url: str | None = None


class PluginNetwork(Strict):
    """The hosts the plugin reaches, as its author states them (listed by `claude plugin validate`)."""

    hosts: list[str]


class PluginManifest(Strict):
    name: str = Field(pattern=KEBAB)
    version: str | None = Field(default=None, pattern=SEMVER)
    description: str | None = None
    author: Author | None = None
    homepage: str | None = None
    repository: str | None = None
    license: str | None = None
    keywords: list[str] | None = None
    commands: RelPath | list[RelPath] | None = None
    agents: RelPath | list[RelPath] | None = None
    skills: RelPath | list[RelPath] | None = None
    outputStyles: RelPath | list[RelPath] | None = None
    hooks: RelPath | dict[str, Any] | None = None
    mcpServers: RelPath | dict[str, Any] | None = None
    icon: RelPath | None = None  # a square PNG or JPEG, 512-2048 px (claude plugin validate warns without one)
    network: PluginNetwork | None = None


# names the marketplace docs reserve for official marketplaces (a subset is enough here)
RESERVED_MARKETPLACES = {
    "claude-code-marketplace", "claude-code-plugins", "claude-plugins-official", "anthropic-marketplace",
    "anthropic-plugins", "agent-skills", "life-sciences", "official", "inline", "builtin", "npm", "github",
}


class MarketplaceEntry(Strict):
    name: str = Field(pattern=KEBAB)
    source: RelPath | dict[str, Any]
    description: str | None = None
    version: str | None = Field(default=None, pattern=SEMVER)
    author: Author | None = None
    category: str | None = None
    keywords: list[str] | None = None
    homepage: str | None = None
    repository: str | None = None
    license: str | None = None


class Marketplace(Strict):
    schema_: str | None = Field(default=None, alias="$schema")
    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
    owner: Author
    description: str | None = None
    version: str | None = None
    plugins: list[MarketplaceEntry] = Field(min_length=1)


class CommandFrontmatter(Strict):
    description: str = Field(min_length=1, max_length=80)
    argument_hint: str | None = Field(default=None, alias="argument-hint")
    allowed_tools: str | list[str] | None = Field(default=None, alias="allowed-tools")
    model: str | None = None
    disable_model_invocation: bool | None = Field(default=None, alias="disable-model-invocation")


def check_hooks(hooks: dict[str, list[MatcherGroup]]) -> list[str]:
    """Every handler is a documented event's ``codemem hook <event>`` with a sane matcher; returns
    the events that have a codemem hook."""
    ours = []
    for event, groups in hooks.items():
        for group in groups:
            for handler in group.hooks:
                if not handler.command.startswith("codemem "):
                    continue
                assert handler.command == f"codemem hook {event}", (event, handler.command)
                assert handler.timeout is not None and handler.timeout <= 60, "short timeouts, in seconds"
                ours.append(event)
                if event in DOC_TOOL_EVENTS:
                    assert group.matcher, f"{event} needs a tool matcher"
                    pattern = re.compile(group.matcher)
                    matched = {tool for tool in CLAUDE_TOOLS if pattern.fullmatch(tool)}
                    expected = {"PreToolUse": {"Edit", "Write", "MultiEdit", "Bash"},
                                "PostToolUse": {"Read", "Edit", "Write", "MultiEdit", "Bash"}}[event]
                    assert matched == expected, (event, matched)
                else:
                    assert group.matcher is None, f"{event}: no tool matcher"
    return ours


def registered_tools() -> set[str]:
    """The tools an MCP client lists (the registry, ``query_server.tools``)."""
    from query_server.tools import mcp_tools

    return {entry.name for entry in mcp_tools()}


MEMORY_TYPES = {"requirements", "design", "code_pattern", "component", "function", "test_history", "session", "user_preference"}

# ------------------------------------------------------------------ a project with the user's own setup

USER_SETTINGS = """{
  "permissions": {
    "allow": ["Bash(npm run test:*)", "Read(~/.zshrc)"],
    "deny": ["Read(./.env)"]
  },
  "model": "opus",
  "hooks": {
    "PostToolUse": [
      {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "npx prettier --write \\"$CLAUDE_PROJECT_DIR\\"", "timeout": 30}]}
    ],
    "Stop": [
      {"hooks": [{"type": "command", "command": "notify-send done"}]}
    ]
  }
}
"""
USER_MCP = '{\n    "mcpServers": {\n        "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}\n    }\n}\n'
USER_CLAUDE_MD = "# Shop service\n\n- Run `make test` before committing.\n- Money is in cents, never floats.\n"
USER_GITIGNORE = "node_modules/\n.env\n*.log"  # no final newline on purpose
USER_FILES = {".claude/settings.json": USER_SETTINGS, ".mcp.json": USER_MCP, "CLAUDE.md": USER_CLAUDE_MD, ".gitignore": USER_GITIGNORE}


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    for rel, text in USER_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    (root / "app.py").write_text("def total(cents: int) -> int:\n    return cents\n")
    return root


@pytest.fixture(autouse=True)
def codemem_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests below run as a user whose ``codemem`` on PATH is this one (as in an activated
    venv), so init writes the bare, portable command; the tests of the other case set PATH themselves."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def init(root: Path, scope: str = "project") -> setup.Plan:
    plan = setup.plan_init(root, scope)
    setup.apply_plan(plan)
    return plan


def undo(root: Path) -> setup.Plan:
    plan = setup.plan_undo(root)
    setup.apply_plan(plan)
    return plan


# ------------------------------------------------------------------ codemem init


def test_init_merges_with_the_users_setup(user_project: Path) -> None:
    plan = init(user_project)
    assert {c.rel: c.action for c in plan.changes} == {
        ".mcp.json": "update", ".claude/settings.json": "update", "CLAUDE.md": "update", ".gitignore": "update",
    }

    mcp = McpFile.model_validate_json((user_project / ".mcp.json").read_text())
    assert set(mcp.mcpServers) == {"github", "codemem"}
    assert json.loads((user_project / ".mcp.json").read_text())["mcpServers"]["github"] == json.loads(USER_MCP)["mcpServers"]["github"]
    server = mcp.mcpServers["codemem"]
    assert isinstance(server, StdioServer) and server.type == "stdio"
    assert [server.command, *server.args] == ["codemem", "mcp", "--project", "."]
    assert {"--project"} <= {opt for p in main.get_command(None, "mcp").params for opt in p.opts}  # the command it launches exists

    raw = json.loads((user_project / ".claude/settings.json").read_text())
    original = json.loads(USER_SETTINGS)
    assert raw["permissions"] == original["permissions"] and raw["model"] == "opus"
    assert raw["hooks"]["PostToolUse"][0] == original["hooks"]["PostToolUse"][0]
    assert raw["hooks"]["Stop"] == original["hooks"]["Stop"]
    settings = SettingsFile.model_validate(raw)
    assert sorted(check_hooks(settings.hooks)) == sorted(spec.event for spec in setup.HOOKS)
    assert {spec.event for spec in setup.HOOKS} == {"SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "SessionEnd",
                                                  "PreToolUse"}

    claude_md = (user_project / "CLAUDE.md").read_text()
    assert claude_md.startswith(USER_CLAUDE_MD)
    assert claude_md.count(setup.SECTION_BEGIN) == 1 and claude_md.count(setup.SECTION_END) == 1

    gitignore = (user_project / ".gitignore").read_text()
    assert gitignore.startswith(USER_GITIGNORE + "\n")
    assert ".codemem/" in gitignore.splitlines()

    record = json.loads((user_project / setup.RECORD_PATH).read_text())
    assert set(record["files"]) == set(USER_FILES)


def test_init_twice_adds_nothing(user_project: Path) -> None:
    init(user_project)
    after_first = snapshot(user_project)
    again = setup.plan_init(user_project)
    assert again.empty and render_is_empty(again)
    setup.apply_plan(again)
    assert snapshot(user_project) == after_first


def render_is_empty(plan: setup.Plan) -> bool:
    return setup.render_diff(plan) == ""


def test_init_keeps_a_users_own_codemem_entries(user_project: Path) -> None:
    """A codemem hook the user tuned (timeout, matcher) and a codemem server of their own stay."""
    settings = json.loads(USER_SETTINGS)
    settings["hooks"]["SessionStart"] = [{"hooks": [{"type": "command", "command": "codemem hook SessionStart", "timeout": 55}]}]
    (user_project / ".claude/settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    mcp = json.loads(USER_MCP)
    mcp["mcpServers"]["codemem"] = {"command": "/opt/codemem/bin/codemem", "args": ["mcp", "--project", "."]}
    (user_project / ".mcp.json").write_text(json.dumps(mcp, indent=2) + "\n")
    plan = init(user_project)
    assert ".mcp.json" not in {c.rel for c in plan.changes}
    assert any("kept the existing `codemem` server" in note for note in plan.notes)
    written = json.loads((user_project / ".claude/settings.json").read_text())
    assert written["hooks"]["SessionStart"] == settings["hooks"]["SessionStart"]


def test_dry_run_shows_a_diff_and_changes_nothing(user_project: Path) -> None:
    before = snapshot(user_project)
    result = CliRunner().invoke(main, ["init", "--project", str(user_project), "--dry-run"])
    assert result.exit_code == 0, result.output
    out = result.output
    for rel in USER_FILES:
        assert f"--- a/{rel}\n+++ b/{rel}\n" in out
    assert re.search(r'^\+\s+"command": "codemem hook PreToolUse",$', out, re.MULTILINE)
    assert f"+{setup.SECTION_BEGIN}\n" in out and "+.codemem/\n" in out
    assert "nothing changed" in out
    assert snapshot(user_project) == before
    assert not (user_project / ".codemem").exists()


def test_dry_run_on_a_bare_project_shows_new_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", "--project", str(tmp_path), "--dry-run"])
    assert result.exit_code == 0, result.output
    for rel in (".mcp.json", ".claude/settings.json", "CLAUDE.md", ".gitignore"):
        assert f"--- /dev/null\n+++ b/{rel}\n" in result.output
    assert list(tmp_path.iterdir()) == []


def test_undo_restores_every_file_byte_for_byte(user_project: Path) -> None:
    before = snapshot(user_project)
    init(user_project)
    result = CliRunner().invoke(main, ["init", "--project", str(user_project), "--undo"])
    assert result.exit_code == 0, result.output
    assert snapshot(user_project) == before
    assert not (user_project / ".codemem").exists()
    assert setup.plan_undo(user_project).empty  # and a second undo has nothing left to do


def test_undo_removes_files_and_directories_init_created(tmp_path: Path) -> None:
    (tmp_path / "main.go").write_text("package main\n")
    before = snapshot(tmp_path)
    init(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"main.go", ".mcp.json", ".claude", "CLAUDE.md", ".gitignore", ".codemem"}
    undo(tmp_path)
    assert snapshot(tmp_path) == before
    assert {p.name for p in tmp_path.iterdir()} == {"main.go"}


def test_undo_after_the_user_edited_keeps_their_edits(user_project: Path) -> None:
    init(user_project)
    settings_path = user_project / ".claude/settings.json"
    settings = json.loads(settings_path.read_text())
    settings["permissions"]["allow"].append("Bash(make lint)")
    settings_path.write_text(json.dumps(settings, indent=2) + "\n")
    claude_md = user_project / "CLAUDE.md"
    claude_md.write_text(claude_md.read_text() + "\n- Prefer small PRs.\n")
    gitignore = user_project / ".gitignore"
    gitignore.write_text(gitignore.read_text() + "dist/\n")

    undo(user_project)
    restored = json.loads(settings_path.read_text())
    expected = json.loads(USER_SETTINGS)
    expected["permissions"]["allow"].append("Bash(make lint)")
    assert restored == expected  # codemem's hooks gone, the user's hooks and the new permission kept
    text = claude_md.read_text()
    assert setup.SECTION_BEGIN not in text and text.startswith(USER_CLAUDE_MD) and "- Prefer small PRs." in text
    assert "codemem" not in gitignore.read_text() and gitignore.read_text().rstrip().endswith("dist/")
    assert (user_project / ".mcp.json").read_bytes() == USER_MCP.encode()  # untouched since init: restored


def test_undo_without_the_record_recognises_codemems_entries(user_project: Path) -> None:
    """A teammate's clone has the committed files but not .codemem/init.json."""
    init(user_project)
    (user_project / setup.RECORD_PATH).unlink()
    undo(user_project)
    assert json.loads((user_project / ".claude/settings.json").read_text()) == json.loads(USER_SETTINGS)
    assert json.loads((user_project / ".mcp.json").read_text()) == json.loads(USER_MCP)
    assert (user_project / "CLAUDE.md").read_text() == USER_CLAUDE_MD  # ended with a newline: exact
    assert (user_project / ".gitignore").read_text().rstrip("\n") == USER_GITIGNORE


def test_allow_read_tools_pre_approves_only_codemems_read_only_tools(user_project: Path) -> None:
    before = snapshot(user_project)
    init(user_project)
    assert json.loads((user_project / ".claude/settings.json").read_text())["permissions"] == json.loads(USER_SETTINGS)["permissions"]
    undo(user_project)
    assert snapshot(user_project) == before  # off by default: the user's permissions untouched

    dry = CliRunner().invoke(main, ["init", "--project", str(user_project), "--dry-run", "--allow-read-tools"])
    assert dry.exit_code == 0, dry.output
    assert re.search(r'^\+\s+"mcp__codemem__code_search",?$', dry.output, re.MULTILINE)  # shown in the diff
    assert snapshot(user_project) == before

    done = CliRunner().invoke(main, ["init", "--project", str(user_project), "--allow-read-tools"])
    assert done.exit_code == 0, done.output
    allow = json.loads((user_project / ".claude/settings.json").read_text())["permissions"]["allow"]
    users = json.loads(USER_SETTINGS)["permissions"]["allow"]
    assert allow[: len(users)] == users  # the user's own rules first, unchanged
    added = set(allow[len(users):])
    assert {"mcp__codemem__code_search", "mcp__codemem__get_symbol", "mcp__codemem__memory_search"} <= added
    assert not added & {"mcp__codemem__memory_add", "mcp__codemem__memory_delete", "mcp__codemem__export_memory",
                        "mcp__codemem__restore", "mcp__codemem__index_directory", "mcp__codemem__record_test_run"}
    assert setup.plan_init(user_project, allow_read_tools=True).empty  # twice adds nothing

    (user_project / setup.RECORD_PATH).unlink()  # a teammate's clone: undo recognises the rules
    undo(user_project)
    restored = json.loads((user_project / ".claude/settings.json").read_text())
    assert restored == json.loads(USER_SETTINGS)


def test_local_scope_stays_out_of_git(user_project: Path) -> None:
    before = snapshot(user_project)
    plan = init(user_project, "local")
    assert {c.rel for c in plan.changes} == {".claude/settings.local.json", "CLAUDE.local.md", ".gitignore"}
    assert any("claude mcp add --scope local codemem -- codemem mcp --project ." in n for n in plan.notes)
    local = SettingsFile.model_validate_json((user_project / ".claude/settings.local.json").read_text())
    assert sorted(check_hooks(local.hooks)) == sorted(spec.event for spec in setup.HOOKS)
    assert (user_project / ".claude/settings.json").read_text() == USER_SETTINGS
    assert setup.SECTION_BEGIN in (user_project / "CLAUDE.local.md").read_text()

    subprocess.run(["git", "init", "-q", str(user_project)], check=True)
    ignored = subprocess.run(
        ["git", "-C", str(user_project), "check-ignore", ".codemem/init.json", "CLAUDE.local.md", ".claude/settings.local.json", "CLAUDE.md"],
        capture_output=True, text=True, check=False,
    ).stdout.split()
    assert ignored == [".codemem/init.json", "CLAUDE.local.md", ".claude/settings.local.json"]
    shutil.rmtree(user_project / ".git")

    init(user_project, "project")  # both scopes, then one undo takes both back
    undo(user_project)
    assert snapshot(user_project) == before


def test_gitignore_entry_already_present_is_not_repeated(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("/.codemem\nbuild/\n")
    plan = setup.plan_init(tmp_path)
    assert ".gitignore" not in {c.rel for c in plan.changes}


def test_claude_md_in_dot_claude_is_used_when_it_is_the_only_one(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude/CLAUDE.md").write_text("# Notes\n")
    plan = setup.plan_init(tmp_path)
    assert ".claude/CLAUDE.md" in {c.rel for c in plan.changes} and "CLAUDE.md" not in {c.rel for c in plan.changes}


def test_bad_json_is_named_with_its_line_and_nothing_changes(user_project: Path) -> None:
    broken = USER_SETTINGS.replace('"model": "opus",', '"model": "opus",,')
    (user_project / ".claude/settings.json").write_text(broken)
    before = snapshot(user_project)
    with pytest.raises(setup.SetupError) as caught:
        setup.plan_init(user_project)
    message = str(caught.value)
    assert message.startswith(".claude/settings.json: not valid JSON at line 6") and "nothing was changed" in message
    result = CliRunner().invoke(main, ["init", "--project", str(user_project)])
    assert result.exit_code == 2 and ".claude/settings.json" in result.output and "line 6" in result.output
    assert "Traceback" not in result.output
    assert snapshot(user_project) == before


@pytest.mark.parametrize("rel, text, needle", [
    (".mcp.json", '["not", "an", "object"]', "expected a JSON object"),
    (".claude/settings.json", '{"hooks": []}', "`hooks` must be an object"),
    (".claude/settings.json", '{"hooks": {"SessionStart": {}}}', "`hooks.SessionStart` must be an array"),
    ("CLAUDE.md", f"# x\n{setup.SECTION_BEGIN}\nno end marker\n", "expected one `<!-- codemem:begin -->`"),
])
def test_other_bad_input_is_refused_before_any_write(tmp_path: Path, rel: str, text: str, needle: str) -> None:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    before = snapshot(tmp_path)
    with pytest.raises(setup.SetupError, match=re.escape(needle)):
        setup.plan_init(tmp_path)
    assert snapshot(tmp_path) == before


def test_missing_project_directory_is_an_input_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", "--project", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "not a directory" in result.output


def test_cli_init_end_to_end(user_project: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(main, ["init", "--project", str(user_project)])
    assert first.exit_code == 0, first.output
    assert "updated .claude/settings.json" in first.output and "codemem init --undo" in first.output
    second = runner.invoke(main, ["init", "--project", str(user_project)])
    assert second.exit_code == 0 and "already set up" in second.output


def test_codemem_init_as_a_real_subprocess(user_project: Path) -> None:
    exe = Path(sys.executable).with_name("codemem")
    if not exe.exists():
        pytest.skip(f"no console script at {exe} (install the package: pip install -e .)")
    before = snapshot(user_project)
    done = subprocess.run([str(exe), "init", "--project", str(user_project)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    settings = SettingsFile.model_validate_json((user_project / ".claude/settings.json").read_text())
    assert len(check_hooks(settings.hooks)) == len(setup.HOOKS)
    undone = subprocess.run([str(exe), "init", "--project", str(user_project), "--undo"], capture_output=True, text=True, timeout=120, check=False)
    assert undone.returncode == 0, undone.stderr
    assert snapshot(user_project) == before


def _codemem_hooks(settings_file: Path) -> dict[str, str]:
    raw = json.loads(settings_file.read_text())
    return {event: handler["command"] for event, groups in raw["hooks"].items() for group in groups
            for handler in group["hooks"] if setup._hook_event(handler["command"]) == event}


def test_init_by_full_path_without_codemem_on_path_writes_commands_that_resolve(user_project: Path, tmp_path: Path) -> None:
    """Issue 18, item 5: `codemem init` run by its full path when `codemem` is not on PATH wrote
    bare `codemem` (a dead server, failing hooks). It now writes the running script's absolute
    path — here one with a space, so the hook commands must be quoted for the shell — and undo
    takes it back byte for byte."""
    script = Path(sys.executable).with_name("codemem")
    if not script.exists():
        pytest.skip(f"no console script at {script} (install the package: pip install -e .)")
    spaced = tmp_path / "my tools" / "codemem"
    spaced.parent.mkdir()
    spaced.symlink_to(script)
    bare_path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                                if d and not (Path(d) / "codemem").exists())
    env = {**os.environ, "PATH": bare_path}
    assert shutil.which("codemem", path=bare_path) is None
    before = snapshot(user_project)

    done = subprocess.run([str(spaced), "init", "--project", str(user_project)], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert "`codemem` is not on PATH" in done.stdout and str(spaced) in done.stdout

    server = McpFile.model_validate_json((user_project / ".mcp.json").read_text()).mcpServers["codemem"]
    assert isinstance(server, StdioServer)
    assert server.command == str(spaced) and Path(server.command).is_absolute() and os.access(server.command, os.X_OK)
    assert server.args == ["mcp", "--project", "."]
    help_run = subprocess.run([server.command, *server.args, "--help"], capture_output=True, text=True,
                              timeout=120, check=False, env=env, cwd=user_project)
    assert help_run.returncode == 0 and "--project" in help_run.stdout, help_run.stderr

    hooks = _codemem_hooks(user_project / ".claude/settings.json")
    assert set(hooks) == {spec.event for spec in setup.HOOKS}
    for event, command in hooks.items():  # the interpreter without its site step (~20 ms less per hook)
        assert command == shlex.join([str(Path(sys.executable).absolute()), "-S", str(setup.HOOK_RUNNER), event])
    for event, payload in (("SessionStart", {}), ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "rm -rf .codemem"}})):
        answer = subprocess.run(["sh", "-c", hooks[event]], input=json.dumps({"cwd": str(user_project), **payload}),
                                capture_output=True, text=True, timeout=60, check=False, env=env, cwd=user_project)
        assert answer.returncode == 0 and not answer.stderr, answer.stderr  # the shell found it (127 before)
        assert json.loads(answer.stdout)["hookSpecificOutput"]["hookEventName"] == event

    again = subprocess.run([str(spaced), "init", "--project", str(user_project)], capture_output=True, text=True,
                           timeout=120, check=False, env=env)
    assert again.returncode == 0 and "already set up" in again.stdout, again.stdout + again.stderr

    undone = subprocess.run([str(spaced), "init", "--project", str(user_project), "--undo"], capture_output=True,
                            text=True, timeout=120, check=False, env=env)
    assert undone.returncode == 0, undone.stderr
    assert snapshot(user_project) == before


def test_find_launcher_keeps_bare_codemem_only_when_it_is_this_one(tmp_path: Path) -> None:
    here = tmp_path / "venv" / "bin"
    here.mkdir(parents=True)
    python = here / "python"
    script = here / "codemem"
    for path in (python, script):
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    other = tmp_path / "other"
    other.mkdir()
    (other / "codemem").write_text("#!/bin/sh\n")
    (other / "codemem").chmod(0o755)

    assert setup.find_launcher(str(script), str(python), path=str(here)) == setup.BARE
    assert setup.find_launcher("/usr/bin/pytest", str(python), path=str(here)).bare  # found beside the interpreter
    missing = setup.find_launcher(str(script), str(python), path=str(tmp_path))
    assert missing.argv == (str(script),) and "not on PATH" in missing.reason
    shadowed = setup.find_launcher(str(script), str(python), path=str(other))
    assert shadowed.argv == (str(script),) and str(other / "codemem") in shadowed.reason
    script.unlink()
    module = setup.find_launcher("/usr/bin/pytest", str(python), path=str(tmp_path))
    assert module.argv == (str(python), "-m", "query_server.entry")
    assert module.mcp_server() == {"type": "stdio", "command": str(python),
                                   "args": ["-m", "query_server.entry", "mcp", "--project", "."]}
    assert module.hook_argv("SessionStart") == [str(python), "-S", str(setup.HOOK_RUNNER), "SessionStart"]
    assert setup.BARE.hook_argv("SessionStart") == ["codemem", "hook", "SessionStart"]  # portable: no paths


def test_the_fast_hook_form_runs_without_site_and_imports_only_the_standard_library(user_project: Path) -> None:
    launcher = setup.Launcher(("/opt/codemem",), "test", python=sys.executable)
    done = subprocess.run([*launcher.hook_argv("PreToolUse")], capture_output=True, text=True, timeout=60, check=False,
                          input=json.dumps({"cwd": str(user_project), "tool_name": "Bash", "tool_input": {"command": "ls"}}),
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=user_project)
    assert done.returncode == 0 and done.stdout == "", done.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "site" not in imported and "query_server.hooks.pre_tool_use" in imported
    foreign = {m for m in imported - {"imported package"} if m.split(".")[0] not in sys.stdlib_module_names}
    assert foreign <= {"query_server", "query_server.hooks", "query_server.hooks.relay", "query_server.hooks.common",
                       "query_server.hooks.dispatch", "query_server.hooks.pre_tool_use"}, foreign


@pytest.mark.parametrize(("argv", "python"), [
    (("/opt/my tools/codemem",), None),
    (("/opt/my tools/codemem",), "/opt/my tools/python"),
    (("/home/u/.venv/bin/python", "-m", "query_server.entry"), "/home/u/.venv/bin/python"),
    (("codemem",), None),
])
def test_undo_recognises_every_launcher_form_without_the_record(user_project: Path, argv: tuple[str, ...], python: str | None) -> None:
    launcher = setup.Launcher(argv, "test", python=python)
    setup.apply_plan(setup.plan_init(user_project, launcher=launcher))
    assert set(_codemem_hooks(user_project / ".claude/settings.json").values()) == {
        shlex.join(launcher.hook_argv(spec.event)) for spec in setup.HOOKS}
    assert setup.plan_init(user_project, launcher=launcher).empty
    (user_project / setup.RECORD_PATH).unlink()
    undo(user_project)
    assert json.loads((user_project / ".claude/settings.json").read_text()) == json.loads(USER_SETTINGS)
    assert json.loads((user_project / ".mcp.json").read_text()) == json.loads(USER_MCP)


def test_a_second_init_with_another_launcher_adds_no_second_hook(user_project: Path) -> None:
    init(user_project)  # bare
    plan = setup.plan_init(user_project, launcher=setup.Launcher(("/opt/codemem/bin/codemem",), "test"))
    assert ".claude/settings.json" not in {c.rel for c in plan.changes} and ".mcp.json" not in {c.rel for c in plan.changes}
    assert any("kept the existing `codemem hook SessionStart` hook" in note for note in plan.notes)
    assert any("kept the existing `codemem` server" in note for note in plan.notes)


def test_claude_md_section_is_short_and_names_real_tools() -> None:
    lines = setup.CLAUDE_SECTION.strip().splitlines()
    assert lines[0] == setup.SECTION_BEGIN and lines[-1] == setup.SECTION_END and len(lines) <= 25
    named = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", setup.CLAUDE_SECTION)) - MEMORY_TYPES
    known = registered_tools()
    assert named <= known, named - known
    for tool in ("code_search", "find_duplicates", "memory_search", "memory_add", "validate_fix",
                 "check_consistency", "trace_requirements", "get_design_context"):
        assert f"`{tool}`" in setup.CLAUDE_SECTION


def test_every_hook_event_is_one_codemem_hook_handles() -> None:
    hooks = pytest.importorskip("query_server.hooks.dispatch", reason="`codemem hook` is added by another change")
    assert {spec.event for spec in setup.HOOKS} == set(hooks.EVENTS)


# ------------------------------------------------------------------ the plugin at the repository root


def test_plugin_manifest_follows_the_documented_schema() -> None:
    manifest = PluginManifest.model_validate_json((REPO / ".claude-plugin/plugin.json").read_text())
    assert manifest.name == "codemem" and manifest.author is not None
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert manifest.version == version
    # the standard locations load without being named (naming ./hooks/hooks.json again loads it twice)
    assert manifest.hooks is None and manifest.mcpServers is None and manifest.commands is None
    with pytest.raises(ValidationError):
        PluginManifest.model_validate({"name": "Code Mem"})
    with pytest.raises(ValidationError):
        PluginManifest.model_validate({"name": "codemem", "commands": "commands"})


def test_marketplace_lists_the_plugin_at_the_repository_root() -> None:
    market = Marketplace.model_validate_json((REPO / ".claude-plugin/marketplace.json").read_text())
    assert market.name not in RESERVED_MARKETPLACES
    (entry,) = market.plugins
    assert entry.name == "codemem" and entry.source == "./"
    assert (REPO / entry.source / ".claude-plugin/plugin.json").is_file()


def test_plugin_hooks_are_the_ones_init_writes() -> None:
    raw = json.loads((REPO / "hooks/hooks.json").read_text())
    hooks = PluginHooksFile.model_validate(raw)
    assert sorted(check_hooks(hooks.hooks)) == sorted(spec.event for spec in setup.HOOKS)
    assert raw["hooks"] == setup.hooks_config()
    with pytest.raises(ValidationError):  # events at the top level: Claude Code refuses to load it
        PluginHooksFile.model_validate(raw["hooks"])


def test_plugin_mcp_server_and_the_example() -> None:
    plugin = McpFile.model_validate_json((REPO / ".mcp.json").read_text())
    server = plugin.mcpServers["codemem"]
    assert isinstance(server, StdioServer) and server.command == "codemem"
    assert server.args == ["mcp", "--project", "${CLAUDE_PROJECT_DIR:-.}"]
    example = json.loads((REPO / "docs/examples/mcp.json").read_text())
    McpFile.model_validate(example)
    assert example == {"mcpServers": {setup.SERVER_NAME: setup.MCP_SERVER}}


class AgentFrontmatter(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    description: str = Field(min_length=40, max_length=500)
    tools: str | None = None
    model: str | None = None


def test_plugin_agents_seed_002_fr_025_fr_026() -> None:
    """The plugin's memory-recall and memory-curator agents (seed 002 FR-025, FR-026): valid
    frontmatter, and every codemem tool they name exists."""
    files = sorted((REPO / "agents").glob("*.md"))
    assert [p.stem for p in files] == ["memory-curator", "memory-recall"]
    known = registered_tools()
    for path in files:
        match = re.match(r"---\n(.*?)\n---\n(.+)", path.read_text(encoding="utf-8"), re.DOTALL)
        assert match, f"{path.name}: YAML frontmatter between --- lines"
        front = AgentFrontmatter.model_validate(yaml.safe_load(match.group(1)))
        assert front.name == path.stem and front.tools is None  # no tools key: the agent gets codemem's MCP tools
        named = {word for word in re.findall(r"`(\w+)", match.group(2)) if re.fullmatch(r"(memory|code|get|normalize)_\w+", word)}
        assert named and named <= known, (path.name, named - known)
    recall, curator = ((REPO / "agents" / f"{name}.md").read_text() for name in ("memory-recall", "memory-curator"))
    assert {"memory_context", "memory_search", "get_related"} <= set(re.findall(r"`(\w+)", recall)) and "never add" in recall
    assert {"memory_health", "get_related", "memory_update"} <= set(re.findall(r"`(\w+)", curator)) and "orphan" in curator


def test_plugin_commands() -> None:
    files = sorted((REPO / "commands").glob("*.md"))
    assert [p.stem for p in files] == ["context", "fix", "health", "recall", "remember"]
    known = registered_tools()
    for path in files:
        assert re.fullmatch(KEBAB, path.stem)
        text = path.read_text(encoding="utf-8")
        match = re.match(r"---\n(.*?)\n---\n(.+)", text, re.DOTALL)
        assert match, f"{path.name}: YAML frontmatter between --- lines"
        front = CommandFrontmatter.model_validate(yaml.safe_load(match.group(1)))
        body = match.group(2)
        if front.argument_hint:
            assert "$ARGUMENTS" in body, path.name
        tools = set(re.findall(r"MCP tool `(\w+)`", body))
        assert tools and tools <= known, (path.name, tools - known)
    assert "memory_search" in (REPO / "commands/recall.md").read_text() and "code_search" in (REPO / "commands/recall.md").read_text()
    # seed 003: review findings are read back by a fix command, which marks each one resolved
    fix = (REPO / "commands/fix.md").read_text()
    assert "`review_findings`" in fix and "`memory_update`" in fix and '"resolved"' in fix
    assert "memory_add" in (REPO / "commands/remember.md").read_text()
    assert {"memory_health", "index_status"} <= set(re.findall(r"`(\w+)`", (REPO / "commands/health.md").read_text()))
    assert "token" in (REPO / "commands/context.md").read_text()
