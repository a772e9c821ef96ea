"""``codemem init --git-notes``: make this clone's git notes a live memory store (seed 003), and undo it.

What it sets, in the repository's own config and hooks (none of it travels with a clone: every clone
that wants it runs ``codemem init --git-notes``):

- ``codemem.notes = true`` — the switch ``query_server.memory.live_notes`` reads;
- per remote, a fetch refspec ``+refs/notes/cs/*:refs/notes/remotes/<remote>/cs/*`` — fetched notes
  land beside the local ones, never over them, and the next sync merges them (a union: the seed's
  ``refs/notes/cs/*:refs/notes/cs/*`` is refused by git as soon as both clones wrote, and forced it
  would drop local notes); and a push refspec ``refs/notes/cs/*:refs/notes/cs/*``, plus ``HEAD`` when
  the remote had no push refspec (a configured one replaces ``git push``'s default of pushing the
  current branch);
- ``notes.rewriteRef`` and ``notes.displayRef`` = ``refs/notes/cs/*``: amend and rebase carry the notes
  to the rewritten commits, and ``git log`` shows them;
- a post-commit hook (``hooks/post-commit`` where ``git rev-parse --git-path hooks`` says, so
  ``core.hooksPath`` is honoured) that runs ``codemem hook GitPostCommit``; an existing shell hook gets
  codemem's lines between markers, anything else is refused with the line to add by hand.

``plan_git_notes`` and ``plan_git_notes_undo`` compute the change without making it; ``render`` shows
it, ``apply`` makes it.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from query_server.claude_setup.entries import Launcher, SetupError
from resources.memory.git_repo import LIVE_NOTES_KEY

PUSH_HEAD_KEY = "codemem.pushhead"
"""The remotes whose ``HEAD`` push refspec init added (undo removes only those)."""
NOTES_REFS = "refs/notes/cs/*"
PUSH_SPEC = f"{NOTES_REFS}:{NOTES_REFS}"
HOOK_BEGIN = "# codemem:begin post-commit"
HOOK_END = "# codemem:end post-commit"
SHELLS = ("sh", "bash", "dash", "zsh", "ksh")


def fetch_spec(remote: str) -> str:
    """The fetch refspec that brings ``remote``'s notes beside the local ones."""
    return f"+{NOTES_REFS}:refs/notes/remotes/{remote}/cs/*"


@dataclass
class GitSetup:
    """The git config values to add and remove, and the post-commit hook's text before and after."""

    root: Path
    hook_path: Path
    hook_before: str | None
    hook_after: str | None
    add: list[tuple[str, str]] = field(default_factory=list)
    remove: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.add and not self.remove and self.hook_before == self.hook_after


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError as exc:
        raise SetupError("git is not installed (or not on PATH) — install git, then run `codemem init --git-notes` again") from exc
    if check and done.returncode != 0:
        raise SetupError(f"git {' '.join(args[:2])} failed: {done.stderr.strip()[-300:]} — nothing was changed")
    return done


def _repository(root: Path) -> tuple[Path, str]:
    """(the hooks directory, the project's path below the work tree's top)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise SetupError(f"not a directory: {root} — pass the project's root with --project PATH")
    if _git(root, "rev-parse", "--is-inside-work-tree", check=False).returncode != 0:
        raise SetupError(f"{root} is not in a git repository — git notes live in one: run `git init` (and commit once), "
                         "then `codemem init --git-notes`; nothing was changed")
    hooks = Path(_git(root, "rev-parse", "--git-path", "hooks").stdout.strip())
    return (hooks if hooks.is_absolute() else root / hooks), _git(root, "rev-parse", "--show-prefix").stdout.strip()


def _values(root: Path, key: str) -> list[str]:
    done = _git(root, "config", "--local", "--get-all", key, check=False)
    return done.stdout.splitlines() if done.returncode == 0 else []


def _hook_block(launcher: Launcher, prefix: str) -> str:
    command = shlex.join(launcher.hook_argv("GitPostCommit"))
    enter = f"cd {shlex.quote('./' + prefix)} || exit 0\n" if prefix else ""
    return (f"{HOOK_BEGIN} — attaches the decisions recorded since the last commit to the new one as git notes\n"
            "# (installed by `codemem init --git-notes`; `codemem init --undo` removes it)\n"
            f"( {enter}{command} ) </dev/null >/dev/null 2>&1 || true\n{HOOK_END}\n")


def _find_block(text: str) -> tuple[int, int] | None:
    match = re.search(rf"^{re.escape(HOOK_BEGIN)}.*?^{re.escape(HOOK_END)}\n?", text, re.MULTILINE | re.DOTALL)
    return (match.start(), match.end()) if match else None


def _is_shell_script(text: str) -> bool:
    first = text.splitlines()[0] if text else ""
    if not first.startswith("#!"):
        return False
    words = first[2:].split()
    program = Path(words[0]).name if words else ""
    if program == "env" and len(words) > 1:
        program = words[1]
    return program in SHELLS


def plan_git_notes(root: Path, launcher: Launcher) -> GitSetup:
    """What ``codemem init --git-notes`` changes in the repository holding ``root``; changes nothing.

    Raises:
        SetupError: Not a git repository, or a post-commit hook codemem cannot add its lines to.
    """
    hooks, prefix = _repository(root)
    hook_path = hooks / "post-commit"
    before = hook_path.read_text(encoding="utf-8") if hook_path.is_file() else None
    block = _hook_block(launcher, prefix)
    if before is None:
        after: str | None = "#!/bin/sh\n" + block
    elif _find_block(before) is not None:
        span = _find_block(before)
        assert span is not None
        after = before[: span[0]] + block + before[span[1] :]
    elif _is_shell_script(before):
        after = before + ("" if before.endswith("\n") else "\n") + block
    else:
        raise SetupError(f"{hook_path} exists and is not a shell script — add this line to it yourself: "
                         f"{shlex.join(launcher.hook_argv('GitPostCommit'))} </dev/null >/dev/null 2>&1; nothing was changed")
    setup = GitSetup(root=Path(root), hook_path=hook_path, hook_before=before, hook_after=after)
    if _values(root, LIVE_NOTES_KEY) != ["true"]:
        setup.add.append((LIVE_NOTES_KEY, "true"))
    for key in ("notes.rewriteRef", "notes.displayRef"):
        if NOTES_REFS not in _values(root, key):
            setup.add.append((key, NOTES_REFS))
    remotes = _git(root, "remote").stdout.split()
    for remote in remotes:
        if fetch_spec(remote) not in _values(root, f"remote.{remote}.fetch"):
            setup.add.append((f"remote.{remote}.fetch", fetch_spec(remote)))
        pushes = _values(root, f"remote.{remote}.push")
        if PUSH_SPEC not in pushes:
            if not pushes:
                setup.add += [(f"remote.{remote}.push", "HEAD"), (PUSH_HEAD_KEY, remote)]
            setup.add.append((f"remote.{remote}.push", PUSH_SPEC))
    if not remotes:
        setup.notes.append("no git remote yet: the notes stay in this clone — after `git remote add`, run "
                           "`codemem init --git-notes` again so `git fetch` and `git push` carry them")
    else:
        setup.notes.append("after `git fetch`, the next `codemem index` (or `codemem notes sync`) merges the fetched notes "
                           "and makes their memories searchable; `git push` sends this clone's notes")
    return setup


def plan_git_notes_undo(root: Path) -> GitSetup | None:
    """What ``codemem init --undo`` takes back in git (None: ``root`` is not in a git repository)."""
    try:
        hooks, _ = _repository(root)
    except SetupError:
        return None
    hook_path = hooks / "post-commit"
    before = hook_path.read_text(encoding="utf-8") if hook_path.is_file() else None
    after = before
    span = _find_block(before) if before is not None else None
    if before is not None and span is not None:
        after = before[: span[0]] + before[span[1] :]
        if after.strip() in ("", "#!/bin/sh"):
            after = None
    setup = GitSetup(root=Path(root), hook_path=hook_path, hook_before=before, hook_after=after)
    if _values(root, LIVE_NOTES_KEY):
        setup.remove.append((LIVE_NOTES_KEY, _values(root, LIVE_NOTES_KEY)[0]))
    for key in ("notes.rewriteRef", "notes.displayRef"):
        if NOTES_REFS in _values(root, key):
            setup.remove.append((key, NOTES_REFS))
    pushed_head = _values(root, PUSH_HEAD_KEY)
    for remote in _git(root, "remote").stdout.split():
        if fetch_spec(remote) in _values(root, f"remote.{remote}.fetch"):
            setup.remove.append((f"remote.{remote}.fetch", fetch_spec(remote)))
        if PUSH_SPEC in _values(root, f"remote.{remote}.push"):
            setup.remove.append((f"remote.{remote}.push", PUSH_SPEC))
        if remote in pushed_head and "HEAD" in _values(root, f"remote.{remote}.push"):
            setup.remove.append((f"remote.{remote}.push", "HEAD"))
    setup.remove += [(PUSH_HEAD_KEY, remote) for remote in pushed_head]
    return setup


def render(setup: GitSetup) -> str:
    """The change as a unified diff of the hook and the ``git config`` commands."""
    out: list[str] = []
    if setup.hook_before != setup.hook_after:
        rel = os.path.relpath(setup.hook_path, setup.root)
        out += difflib.unified_diff(
            (setup.hook_before or "").splitlines(keepends=True), (setup.hook_after or "").splitlines(keepends=True),
            fromfile="/dev/null" if setup.hook_before is None else f"a/{rel}", tofile="/dev/null" if setup.hook_after is None else f"b/{rel}",
        )
    out += [f"git config {'' if key == LIVE_NOTES_KEY else '--add '}{key} {shlex.quote(value)}\n" for key, value in setup.add]
    out += [f"git config --unset {key} {shlex.quote(value)}\n" for key, value in setup.remove]
    return "".join(out)


def apply(setup: GitSetup) -> list[str]:
    """Make the change; one line per thing done."""
    done: list[str] = []
    for key, value in setup.add:
        _git(setup.root, "config", "--local", *(() if key == LIVE_NOTES_KEY else ("--add",)), key, value)
        done.append(f"git config {key} {'=' if key == LIVE_NOTES_KEY else '+='} {value}")
    for key, value in setup.remove:
        _git(setup.root, "config", "--local", "--unset-all", key, f"^{re.escape(value)}$", check=False)
        done.append(f"git config {key} -= {value}")
    if setup.hook_before != setup.hook_after:
        if setup.hook_after is None:
            setup.hook_path.unlink(missing_ok=True)
            done.append(f"removed {setup.hook_path}")
        else:
            setup.hook_path.parent.mkdir(parents=True, exist_ok=True)
            setup.hook_path.write_text(setup.hook_after, encoding="utf-8")
            setup.hook_path.chmod(setup.hook_path.stat().st_mode | 0o755)
            done.append(f"{'created' if setup.hook_before is None else 'updated'} {setup.hook_path}")
    return done
