"""The hooks at the interpreter's floor (issue 18): ``<python> -S run_hook.py <Event>`` imports neither
``re``, ``json``, ``pathlib`` nor ``enum`` on its normal paths, and nothing outside the standard library;
what replaces them (``common.json_loads``/``json_dumps``, the gotcha check, os.path) answers as they did."""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from query_server.hooks import common
from query_server.hooks.common import Project, json_dumps, json_loads, session_key
from query_server.hooks.post_tool_use import (
    _FOLD,
    _GOTCHA,
    _GOTCHA_WORDS,
    _has_word,
    _word_char,
)
from tests.query_server.hooks.test_hooks import (
    FIXTURES,
    clean_env,
    payload,
    project,  # noqa: F401 - the fixture: a real ledger and manifest
    read_of,
)

RUN_HOOK = Path(common.__file__).with_name("run_hook.py")
HEAVY = {"re", "json", "pathlib", "enum"}
"""What the hooks' normal paths must not import: ~10 ms each under -S, a third of a bare interpreter start."""
OURS = {"query_server", "query_server.hooks", "resources", "resources.memory", "resources.sqlite_readonly",
        "resources.manifest_reader", "resources.memory.ledger_reader"}


def run_bare(event: str, data: dict[str, Any], root: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run the hook as Claude Code does (``-S``, the runner), with ``-X importtime``: (the process, what it imported)."""
    done = subprocess.run([sys.executable, "-S", "-X", "importtime", str(RUN_HOOK), event], input=json.dumps(data),
                          capture_output=True, text=True, cwd=root, env=clean_env(**env), timeout=60, check=False)
    lines = done.stderr.splitlines()
    assert done.returncode == 0 and all(line.startswith("import time:") for line in lines), done.stderr[-2000:]
    return done, {line.split("|")[-1].strip() for line in lines} - {"imported package"}


def assert_at_the_floor(case: str, modules: set[str]) -> None:
    assert not modules & HEAVY, (case, sorted(modules & HEAVY))
    foreign = {m for m in modules if m.split(".")[0] not in sys.stdlib_module_names
               and m not in OURS and not m.startswith("query_server.hooks.")}
    assert not foreign, (case, foreign)


def _wait(check: Any, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_hook_processes_import_neither_re_json_pathlib_nor_enum(project: dict[str, Any]) -> None:  # noqa: F811
    root, state, ids = project["root"], project["state"], project["ids"]
    cache, lock = state / "hooks" / "mentions.db", state / "hooks" / "mentions.build.lock"

    # PostToolUse before the mentions cache exists: the ledger scan (and the start of the cache's build)
    done, modules = run_bare("PostToolUse", read_of(root, "src/dispatch.py", session="scan"), root)
    assert ids["Dispatch outside transactions"] in done.stdout  # scored, the gotcha check included
    assert_at_the_floor("PostToolUse Read, ledger scan", modules)
    assert _wait(lambda: cache.is_file() and not lock.exists())

    done, modules = run_bare("SessionStart", payload("session_start.json", root, session_id="floor-start"), root)
    assert "Memories: 8 active" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert_at_the_floor("SessionStart", modules)

    for tool in ("Read", "Edit", "Write"):  # the mentions cache is current now
        done, modules = run_bare("PostToolUse", read_of(root, "src/dispatch.py", tool, session=f"cache-{tool}"), root)
        text = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
        assert ids["Dispatch outside transactions"] in text.splitlines()[1], text  # the gotcha first
        assert_at_the_floor(f"PostToolUse {tool}, mentions cache", modules)
    done, modules = run_bare("PostToolUse", read_of(root, "README.md", session="quiet"), root)
    assert done.stdout == ""
    assert_at_the_floor("PostToolUse Read, no memory", modules)

    for tool_input, tool in (({"command": "npm test"}, "Bash"), ({"file_path": str(root / "src/other.py")}, "Edit")):
        done, modules = run_bare("PreToolUse", payload("pre_tool_use_bash.json", root, tool_name=tool, tool_input=tool_input), root)
        assert done.stdout == ""
        assert_at_the_floor(f"PreToolUse {tool}", modules)

    done, modules = run_bare("PostToolUse", payload("post_tool_use_write.json", root, tool_name="Bash", session_id="floor-bash",
                                                    tool_input={"command": "pytest src/dispatch.py -q"}), root)
    assert ids["Dispatch outside transactions"] in done.stdout
    assert_at_the_floor("PostToolUse Bash", modules)
    prompt = payload("user_prompt_submit.json", root, prompt="start", session_id="floor-prompt")
    assert run_bare("UserPromptSubmit", prompt, root)[0].stdout == ""
    for rel in ("src/dispatch.py", "src/other.py", "README.md"):
        run_bare("PostToolUse", read_of(root, rel, "Edit", session="floor-prompt"), root)
    done, modules = run_bare("UserPromptSubmit", {**prompt, "prompt": "Should we retry inside the transaction?"}, root)
    assert "3 files edited" in done.stdout and "design decision" in done.stdout  # both reminders, the ledger read
    assert_at_the_floor("UserPromptSubmit", modules)

    transcript = root.parent / "transcript.jsonl"
    transcript.write_text((FIXTURES / "transcript.jsonl").read_text().replace("PROJECT", str(root)))
    for number, (event, name) in enumerate((("PreCompact", "pre_compact.json"), ("SessionEnd", "session_end.json")), 1):
        data = payload(name, root, session_id=f"floor-{event}", transcript_path=str(transcript))
        done, modules = run_bare(event, data, root, CODEMEM_HOOK_WORKER_DRY_RUN="1")
        assert done.stdout == ""
        assert_at_the_floor(event, modules)
        log = state / "logs" / "hooks-worker.log"  # the worker the hook started (dry run: it stores nothing)
        assert _wait(lambda: log.is_file() and log.read_text().count("dry run") >= number, 120), log.read_text()
    assert not (state / "logs" / "hooks.log").exists()


# -- JSON through _json ---------------------------------------------------------------------------


VALUES: list[Any] = [
    {}, [], "", 0, -1, 10**30, -(10**30), 1.5, -0.0, 0.0, 1e300, -1e-300, 5e-324, 1.7976931348623157e308, 0.1 + 0.2,
    float("inf"), float("-inf"), True, False, None, "plain", "é ü ß — “quotes” …", "日本語", "emoji 🎉 \U0001f600",
    "\ud800 lone \udfff surrogates", "control \x00\x01\x1f\x7f \t\n\r\b\f", 'quote " backslash \\ slash /',
    "x" * 100_000, "é" * 50_000, {"nested": {"deeper": [1, [2, [3, {"k": None}]], {"": ""}]}},
    {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "codemem — memories\n  ! [gotcha] …"}},
    {1: "int key", 2.5: "float key", False: "bool key", None: "null key"}, [True, False, None, 1, 1.0, "1"],
    {"z": 1, "a": 2, "m": [3]}, (1, 2, "tuple"), list(range(1000)),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: repr(v)[:40])
def test_json_dumps_is_json_dumps_byte_for_byte(value: Any) -> None:
    assert common._C_JSON is not None or sys.implementation.name != "cpython"  # the accelerator is in use
    assert json_dumps(value) == json.dumps(value)


@pytest.mark.parametrize("value", VALUES, ids=lambda v: repr(v)[:40])
def test_json_loads_is_json_loads(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False), json.dumps(value, indent=2),
                 f" \t\r\n{json.dumps(value)}\n\n ", json.dumps(value, separators=(",", ":"))):
        got, expected = json_loads(text), json.loads(text)
        assert json.dumps(got) == json.dumps(expected) and type(got) is type(expected)


def test_json_loads_constants_and_numbers_as_json_does() -> None:
    for text in ("NaN", "Infinity", "-Infinity", "[NaN, -Infinity]", "1e400", "-0.0", "-0", "1E+2", "123456789012345678901234567890"):
        assert repr(json_loads(text)) == repr(json.loads(text)), text
    assert math.isnan(json_loads("NaN")) and json_loads("-Infinity") == float("-inf")


BAD_TEXTS = ["", " ", "\n\t", "{", "[1,]", '{"a": 1} x', "[] []", "1 2", '"abc', "nan", "NAN", "infinity", "+1", "01",
             "tru", "null!", "{'a': 1}", '{"a" 1}', '"\\x"', '"tab\there"', "\ufeff{}", " \ufeff{}", "[" * 100 + "]" * 99, "\x0b1"]


@pytest.mark.parametrize("text", BAD_TEXTS, ids=repr)
def test_json_loads_rejects_what_json_rejects_with_its_error(text: str) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        json_loads(text)
    assert (type(got.value), str(got.value)) == (type(expected.value), str(expected.value))


def test_json_errors_bytes_and_the_fallback_are_json_s(monkeypatch: pytest.MonkeyPatch) -> None:
    circular: list[Any] = []
    circular.append(circular)
    for bad, error in ((object(), TypeError), ({"k": {1, 2}}, TypeError), ({(1, 2): 3}, TypeError), (circular, ValueError),
                       (float("nan"), None)):
        if error is None:
            assert json_dumps(bad) == json.dumps(bad) == "NaN"
            continue
        with pytest.raises(error) as expected:
            json.dumps(bad)
        with pytest.raises(error) as got:
            json_dumps(bad)
        assert str(got.value) == str(expected.value)
    shared = [1]
    assert json_dumps([shared, shared, {"again": shared}]) == json.dumps([shared, shared, {"again": shared}])  # no stale markers
    assert json_loads(b' {"a": "\xc3\xa9"} ') == json.loads(b' {"a": "\xc3\xa9"} ')  # type: ignore[arg-type]

    monkeypatch.setattr(common, "_C_JSON", None)  # no accelerator: json itself
    value = {"a": [1, 2.5, None, "é"], 3: float("inf")}
    assert json_dumps(value) == json.dumps(value) and json_loads(' {"a": [1]} ') == {"a": [1]}


# -- the gotcha check without re ------------------------------------------------------------------


def test_the_case_folding_and_word_characters_are_re_s() -> None:
    """``_has_word`` relies on: a character ``re`` matches, ignoring case, with a letter of the gotcha words is
    exactly one that ``translate(_FOLD).lower()`` turns into that letter, folding keeps the length, and ``\\w``
    is ``_word_char``. Checked over every code point of this Python's Unicode database."""
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    folded = [ch.translate(_FOLD).lower() for ch in everything]
    assert all(len(f) == 1 for f in folded)
    for letter in set("".join(_GOTCHA_WORDS)):
        matched = set(re.findall("(?i)" + re.escape(letter), everything))
        assert matched == {ch for ch, f in zip(everything, folded, strict=True) if f == letter}, letter
    assert set(re.findall(r"\w", everything)) == {ch for ch in everything if _word_char(ch)}


GOTCHA_TEXTS = [
    "Gotcha: never call it twice", "GOTCHAS", "a pitfall.", "pitfalls!", "Beware of dogs", "caveat emptor", "CaveatS",
    "be careful", "carefully", "workaround", "work around", "a footgun", "foot-guns", "foot--gun", "footgunner",
    "Watch Out", "watch  out", "watch\nout", "do not", "DON'T", "dont", "don’t", "never", "nevertheless", "_never",
    "never_", "2never", "never2", "—never—", "ünever", "neverü", "(never)", "pİtfall", "pıtfall", "PITFALL", "caveatſ",
    "worKaround", "ſ", "İ", "nothing to see", "", "NEVER" * 3, "x never", "never x", "Σnever", "neverΣ", "do not.",
]


def test_the_gotcha_check_finds_what_the_regex_finds() -> None:
    rng = random.Random(18)
    pieces = ["never", "do not", "don't", "foot", "-", "gun", "s", "watch", " ", "out", "pitfall", "careful", "caveat",
              "gotcha", "beware", "workaround", "_", "x", "9", "é", "İ", "ı", "ſ", "K", "—", ".", "\n", "N", "E", "V", "R"]
    texts = GOTCHA_TEXTS + ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(20_000)]
    for text in texts:
        assert _has_word(text, _GOTCHA_WORDS) == bool(re.search(_GOTCHA, text)), repr(text)


# -- paths and keys -------------------------------------------------------------------------------


def test_session_key_is_the_regex_one() -> None:
    def reference(session_id: str) -> str:
        clean = re.sub(r"[^A-Za-z0-9_-]", "", session_id)[:64]
        if clean != session_id:
            clean = f"{clean[:48]}-{zlib.crc32(session_id.encode()):08x}"
        return clean or "unknown"

    for session_id in ("5b0f4a8e-2d7c-4a51-9d0e-7c4b1a2f3e90", "", "a/b\\c..d", "é ü", "x" * 100, "ABC_def-09", "İK"):
        assert session_key(session_id) == reference(session_id)


def test_project_relative_is_the_pathlib_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def reference(root: Path, raw: str, cwd: str | None) -> str | None:  # Project.relative before os.path
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = Path(cwd or root) / path
        path = Path(os.path.normpath(path))
        for candidate in (path, Path(os.path.realpath(path))):
            try:
                return candidate.relative_to(root).as_posix()
            except ValueError:
                continue
        return None

    root = tmp_path / "proj"
    (root / ".codemem").mkdir(parents=True)
    (root / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "link").symlink_to(root / "src")
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.delenv("CODEMEM_PROJECT_ROOT", raising=False)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.delenv("CODEMEM_STATE_DIR", raising=False)
    target = Project({"cwd": str(root / "src" / "pkg")})
    assert (target.root, target.state_dir) == (str(root), str(root / ".codemem"))
    for raw in ("a.py", "../b.py", "../../c.py", "../../../d.py", str(root), str(root / "src/x.py"), "", ".",
                str(tmp_path / "link" / "pkg" / "e.py"), "~/f.py", "~", "/elsewhere/g.py", str(root) + "x/h.py", "./.codemem/i"):
        for cwd in (None, str(root / "src" / "pkg"), str(tmp_path)):
            assert target.relative(raw, cwd) == reference(Path(target.root), raw, cwd), (raw, cwd)
