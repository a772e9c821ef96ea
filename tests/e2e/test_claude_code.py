"""End to end with the real Claude Code CLI: `codemem init`, then `claude -p` against a fake API.

The pinned ``@anthropic-ai/claude-code`` (``CODEMEM_E2E_CLAUDE_CODE`` overrides the version) is
installed from the npm registry into ``bench/.cache/claude-code/<version>`` on first use (skipped
with the reason when npm or the registry is unreachable). A fixture project gets the product's
real ``codemem index`` and ``codemem init``; each ``claude -p`` runs in it with ``HOME`` and
``CLAUDE_CONFIG_DIR`` in a tmp dir and ``ANTHROPIC_BASE_URL`` pointing at ``FakeAnthropic``
(tests/e2e/fake_anthropic.py), which plays a script of tool calls and records every request: the
tests assert on what the model would see.

What this Claude Code version shows the model: the MCP tools are deferred — their names
(``mcp__codemem__<tool>``) are listed in a system message, and a ``ToolSearch`` call with
``select:<names>`` puts their full schemas into ``tools`` for the following requests. The
SessionStart hook's context arrives as ``SessionStart hook additional context: …`` in the system
text; PostToolUse's follows the tool result it belongs to.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from query_server.tools import mcp_tools
from tests.conftest import git_init, write_files
from tests.e2e.fake_anthropic import FakeAnthropic, Turn, text_of, tool_results
from tests.reliability.graph_servers import stop_graph_servers

REPO = Path(__file__).resolve().parents[2]
VERSION = os.environ.get("CODEMEM_E2E_CLAUDE_CODE", "2.1.332")
CACHE = REPO / "bench" / ".cache" / "claude-code" / VERSION
VENV_BIN = Path(sys.executable).parent
CLAUDE_TIMEOUT_S = 180

FILES = {
    "billing/invoice.py": '''"""Invoices."""


def compute_invoice_total(lines, tax_rate=0.2):
    """Sum the price times quantity of every invoice line and add the tax."""
    subtotal = sum(line.price * line.quantity for line in lines)
    return round(subtotal * (1 + tax_rate), 2)


def format_invoice_number(year, sequence):
    """INV-<year>-<sequence, six digits>."""
    return f"INV-{year}-{sequence:06d}"
''',
    "shipping/rates.py": '''"""Shipping rates."""


def parcel_shipping_cost(weight_kg, zone):
    """Shipping cost of one parcel from its weight and the destination zone."""
    base = {"domestic": 4.5, "eu": 9.0}.get(zone, 15.0)
    return base + max(0.0, weight_kg - 1.0) * 1.2
''',
}
MEMORY_TEXT = (
    "Gotcha: compute_invoice_total in billing/invoice.py already adds the tax; callers must never add "
    "tax again (decided after the double-tax incident, marker e2e-7f3a)."
)
SESSION_START = "SessionStart hook additional context:"
CODEMEM_TOOLS = sorted(tool.name for tool in mcp_tools())


def _select(*names: str) -> Turn:
    return Turn("", [("ToolSearch", {"query": "select:" + ",".join(f"mcp__codemem__{n}" for n in names)})])


def _call(name: str, **tool_input: Any) -> Turn:
    return Turn("", [(f"mcp__codemem__{name}", tool_input)])


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    """The claude executable of the pinned version, installed into the cache on first use."""
    binary = CACHE / "node_modules" / ".bin" / "claude"
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not on PATH: cannot install @anthropic-ai/claude-code")
        CACHE.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", f"@anthropic-ai/claude-code@{VERSION}"],
                capture_output=True, text=True, timeout=600, env={**os.environ, "npm_config_cache": str(CACHE.parent / ".npm")},
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm install @anthropic-ai/claude-code@{VERSION} timed out (registry unreachable?)")
        if done.returncode != 0 or not binary.exists():
            pytest.skip(f"npm install @anthropic-ai/claude-code@{VERSION} failed (registry unreachable?): "
                        f"{(done.stderr or done.stdout).strip()[-500:]}")
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "DISABLE_AUTOUPDATER": "1"})
    assert version.returncode == 0 and VERSION in version.stdout, version
    return binary


def _codemem_env() -> dict[str, str]:
    """The environment of codemem and claude: this venv's `codemem` first on PATH, no outer Claude Code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, FakeAnthropic]]:
    """(project, home, fake API): the fixture project indexed and set up by `codemem init`."""
    base = tmp_path_factory.mktemp("claude-e2e")
    project, home = base / "shop", base / "home"
    project.mkdir()
    (home / ".claude").mkdir(parents=True)  # no user settings: -p starts the project's .mcp.json server unasked
    write_files(project, FILES)
    git_init(project)
    env = {**_codemem_env(), "CODEMEM_GLOBAL_DIR": str(base / "global-memory")}
    codemem = str(VENV_BIN / "codemem")
    indexed = subprocess.run([codemem, "index", "--plain", str(project)], capture_output=True, text=True, env=env, timeout=300)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    init = subprocess.run([codemem, "init", "--project", str(project)], capture_output=True, text=True, env=env, timeout=120)
    assert init.returncode == 0, init.stdout + init.stderr
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["codemem"]["command"] == "codemem", init.stdout
    fake = FakeAnthropic()
    fake.base_url = fake.start()
    yield project, home, fake
    fake.stop()
    if os.environ.get("CODEMEM_E2E_DUMP"):  # every request the fake got, for a look at what the model saw
        Path(os.environ["CODEMEM_E2E_DUMP"]).write_text(json.dumps(fake.requests, indent=1, ensure_ascii=False))
    wait_until_unowned(project)  # the sessions' SessionEnd workers
    left = stop_graph_servers(base)
    assert left == [], f"graph server(s) {left} outlived the Claude Code sessions (stopped now)"


@dataclass
class Session:
    tag: str
    proc: subprocess.Popen
    started: float

    def wait(self) -> dict[str, Any]:
        try:
            out, err = self.proc.communicate(timeout=CLAUDE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
            pytest.fail(f"claude -p [{self.tag}] ran over {CLAUDE_TIMEOUT_S} s: {err[-2000:]}")
        assert self.proc.returncode == 0, f"claude -p [{self.tag}] exited {self.proc.returncode}: {out[-2000:]} {err[-2000:]}"
        result = json.loads(out)
        assert result.get("is_error") is False and result.get("subtype") == "success", result
        result["elapsed_s"] = time.monotonic() - self.started
        return result


def start_claude(claude_bin: Path, workspace: tuple[Path, Path, FakeAnthropic], tag: str, script: list) -> Session:
    """Start `claude -p "[[tag]] …"` in the project, the fake API playing ``script`` for it."""
    project, home, fake = workspace
    fake.script[tag] = script
    env = {
        **_codemem_env(),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "sk-ant-e2e-fake",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    argv = [str(claude_bin), "-p", f"[[{tag}]] use codemem", "--output-format", "json",
            # --dangerously-skip-permissions is refused as root; allow what the scripts call instead
            "--allowedTools", "mcp__codemem", "Read", "ToolSearch"]
    proc = subprocess.Popen(argv, cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    return Session(tag, proc, time.monotonic())


def run_claude(claude_bin: Path, workspace: tuple[Path, Path, FakeAnthropic], tag: str, script: list) -> dict[str, Any]:
    return start_claude(claude_bin, workspace, tag, script).wait()


def results_of(fake: FakeAnthropic, tag: str, tool: str) -> list[str]:
    """The texts of every result of ``tool`` that the model got in conversation ``tag``."""
    requests = fake.conversation(tag)
    assert requests, f"no request of conversation {tag}"
    found = [text for name, text, _ in tool_results(requests[-1]) if name == tool]
    assert found, f"no {tool} result in {tag}: {tool_results(requests[-1])}"
    return found


def system_text(body: dict[str, Any]) -> str:
    """All system text of a request: the system prompt and system-role messages."""
    parts = [text_of(body.get("system"))]
    parts += [text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "system"]
    return "\n".join(parts)


def session_start_context(body: dict[str, Any]) -> str:
    """What the SessionStart hooks added to the context of a session's first request."""
    system = system_text(body)
    start = system.find(SESSION_START)
    assert start != -1, f"no SessionStart context in the system text: {system[:3000]}"
    end = system.find("\n\n", start)
    return system[start + len(SESSION_START): end if end != -1 else None].strip()


def test_tools_offered_and_code_search_hit(claude_bin: Path, workspace) -> None:
    """Every codemem MCP tool reaches the model (deferred behind ToolSearch), and a code_search
    result holds the fixture's function with its file."""
    _, _, fake = workspace
    result = run_claude(claude_bin, workspace, "search", [
        _select("code_search"),
        _call("code_search", query="sum of invoice lines with tax"),
        Turn("found it"),
    ])
    assert result["result"] == "found it"
    requests = fake.conversation("search")
    assert len(requests) == 3
    offered = {tool["name"]: tool for tool in requests[-1]["tools"]}
    deferred = set(re.findall(r"^mcp__codemem__(\w+)$", "\n".join(system_text(r) for r in requests), re.M))
    seen = deferred | {name.removeprefix("mcp__codemem__") for name in offered}
    assert set(CODEMEM_TOOLS) <= seen, f"tools the model never saw: {set(CODEMEM_TOOLS) - seen}"
    assert "memory_add" in deferred  # deferred: listed by name only until a ToolSearch loads it
    assert "mcp__codemem__code_search" in offered, sorted(offered)
    assert "query" in offered["mcp__codemem__code_search"]["input_schema"]["properties"]
    assert "ToolSearch" in offered
    (hit,) = results_of(fake, "search", "mcp__codemem__code_search")
    assert "compute_invoice_total" in hit and "billing/invoice.py" in hit, hit


def test_session_start_context_reaches_model(claude_bin: Path, workspace) -> None:
    """The SessionStart hook's summary of the project's memory and index is in the system text."""
    project, _, fake = workspace
    run_claude(claude_bin, workspace, "hello", [Turn("hi")])
    (first,) = fake.conversation("hello")
    context = session_start_context(first)
    assert context.startswith("codemem — project memory and code index for shop"), context
    assert re.search(r"^Index: [23] files, last indexed", context, re.M), context
    assert "memory_search (decisions, patterns, gotchas)" in context


def test_user_prompt_submit_reminder_reaches_model(claude_bin: Path, workspace) -> None:
    """Seed 002 FR-032: a prompt that reads like a design decision ("should we …") gets the
    UserPromptSubmit hook's reminder to look up earlier decisions, in the model's context."""
    _, _, fake = workspace
    run_claude(claude_bin, workspace, "should-we-adopt-redis", [Turn("noted")])
    (first,) = fake.conversation("should-we-adopt-redis")
    seen = json.dumps(first, ensure_ascii=False)
    assert "this reads like a design decision" in seen and "memory_search" in seen
    run_claude(claude_bin, workspace, "plain-prompt", [Turn("ok")])  # "[[plain-prompt]] use codemem": no decision
    (plain,) = fake.conversation("plain-prompt")
    assert "this reads like a design decision" not in json.dumps(plain, ensure_ascii=False)


def test_memory_carried_to_next_session(claude_bin: Path, workspace) -> None:
    """Session 1 stores a memory and reads the file it is about (PostToolUse adds the memory to the
    context); session 2, a new process, is told a memory is new and finds it with memory_search."""
    project, _, fake = workspace
    run_claude(claude_bin, workspace, "remember", [
        _select("memory_add"),
        _call("memory_add", memory_type="code_pattern", content=MEMORY_TEXT, metadata={
            "pattern_name": "Tax is added once", "pattern_type": "Convention", "language": "python",
            "code_template": "total = compute_invoice_total(lines)", "usage_context": "totals of invoices",
            "example_implementations": ["billing/invoice.py"],
        }),
        Turn("", [("Read", {"file_path": str(project / "billing" / "invoice.py")})]),
        Turn("noted"),
    ])
    (added,) = results_of(fake, "remember", "mcp__codemem__memory_add")
    assert "memory_id" in added and "error" not in added.lower()[:200], added
    (read,) = results_of(fake, "remember", "Read")
    assert "compute_invoice_total" in read
    last = json.dumps(fake.conversation("remember")[-1]["messages"][-3:], ensure_ascii=False)
    assert "codemem: project memories about billing/invoice.py" in last and "e2e-7f3a" in last, last[-3000:]

    run_claude(claude_bin, workspace, "recall", [
        _select("memory_search"),
        _call("memory_search", query="adding tax to invoice totals"),
        Turn("recalled"),
    ])
    context = session_start_context(fake.conversation("recall")[0])
    assert re.search(r"^Since the last session .*: [1-9]\d* new", context, re.M), context
    assert "+ [code_pattern] Tax is added once: Gotcha: compute_invoice_total" in context, context  # listed as new
    (found,) = results_of(fake, "recall", "mcp__codemem__memory_search")
    assert "e2e-7f3a" in found, found


def mcp_servers_of(project: Path) -> list[int]:
    """Pids of the `codemem mcp` processes running in ``project`` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"mcp" in argv and any(a.endswith(b"codemem") for a in argv[:2]) and Path(cwd) == project:
            pids.append(int(entry.name))
    return sorted(pids)


def lock_holders(project: Path) -> list[int]:
    """Pids that hold the flock on the project's owner.lock (Linux /proc/locks): the owner."""
    try:
        inode = (project / ".codemem" / "owner.lock").stat().st_ino
    except FileNotFoundError:
        return []
    holders = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
            holders.append(int(fields[4]))
    return holders


def hook_workers_of(project: Path) -> list[int]:
    """Pids of the detached hook workers (SessionEnd's session memory) running for ``project``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if "query_server.hooks.worker" in argv and str(project) in argv:
                pids.append(int(entry.name))
    return pids


def wait_until_unowned(project: Path, timeout_s: float = 60.0) -> None:
    """Wait until the earlier sessions' hook workers are done and no process owns the project's stores."""
    deadline = time.monotonic() + timeout_s
    while (busy := hook_workers_of(project) + lock_holders(project)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not busy, f"process(es) {busy} still work on the project {timeout_s:g} s after the sessions ended"


def test_two_sessions_at_once(claude_bin: Path, workspace) -> None:
    """Two `claude -p` at once on one project: two codemem servers, one owning the stores and the
    other forwarding to it, and both sessions get their search result.

    The fake holds each session's search call, and then its last answer, until the other session
    got there too, so the two sessions overlap for sure."""
    project, _, fake = workspace
    if not Path("/proc/self/cwd").exists():
        pytest.skip("needs /proc to see the codemem servers")
    together = threading.Barrier(2, timeout=CLAUDE_TIMEOUT_S / 2)
    seen: dict[str, Any] = {}
    wait_until_unowned(project)  # earlier sessions' SessionEnd workers

    def search(query: str):
        def step(body: dict[str, Any]) -> Turn:
            together.wait()
            return _call("code_search", query=query)
        return step

    def finish(tag: str):
        def step(body: dict[str, Any]) -> Turn:
            if together.wait() == 0:  # both searched; both servers are up
                seen["servers"] = mcp_servers_of(project)
                seen["owners"] = lock_holders(project)
            together.wait()
            return Turn(f"{tag} done")
        return step

    sessions = [
        start_claude(claude_bin, workspace, tag, [_select("code_search"), search(query), finish(tag)])
        for tag, query in (("twin_a", "invoice number format"), ("twin_b", "parcel shipping cost by zone"))
    ]
    results = [session.wait() for session in sessions]
    assert [r["result"] for r in results] == ["twin_a done", "twin_b done"]
    (a,) = results_of(fake, "twin_a", "mcp__codemem__code_search")
    (b,) = results_of(fake, "twin_b", "mcp__codemem__code_search")
    assert "format_invoice_number" in a, a
    assert "parcel_shipping_cost" in b, b
    assert len(seen["servers"]) == 2, seen  # one codemem mcp per session
    assert len(seen["owners"]) == 1 and seen["owners"][0] in seen["servers"], seen  # one owns, the other forwards


def test_the_plugin_passes_claude_plugin_validate_without_warnings(claude_bin: Path, tmp_path: Path) -> None:
    """The repository as a Claude Code plugin: the real validator finds nothing to warn about (an icon,
    the declared network hosts)."""
    env = {**_codemem_env(), "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude"), "DISABLE_AUTOUPDATER": "1"}
    done = subprocess.run([str(claude_bin), "plugin", "validate", str(REPO)], capture_output=True, text=True,
                          timeout=120, env=env, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "Validation passed" in out, out[-3000:]
    assert "warning" not in out.lower() and "not declared" not in out, out[-3000:]
    assert "api.voyageai.com (declared)" in out
