"""``codemem init``: set a project up for Claude Code (MCP server, hooks, CLAUDE.md section,
.gitignore) and, with ``--git-notes``, its git notes as a live memory store; show it as a diff first
with ``--dry-run``, take it back with ``--undo``.

A thin command over ``claude_setup``, which computes and applies the changes.
"""

from __future__ import annotations

from pathlib import Path

import click

from query_server import claude_setup as setup
from query_server.claude_setup import git_hooks
from query_server.cli.common import InputError, main


@main.command()
@click.option("--project", default=".", show_default=True, help="The project to set up.")
@click.option("--dry-run", is_flag=True, help="Print a unified diff of every file it would change; change nothing.")
@click.option("--undo", is_flag=True, help="Remove what init added (both scopes); your own content stays as it was.")
@click.option(
    "--scope", type=click.Choice(setup.SCOPES), default="project", show_default=True,
    help="project: .mcp.json, .claude/settings.json and CLAUDE.md, shared through git; "
         "local: .claude/settings.local.json and CLAUDE.local.md, gitignored, for you only.",
)
@click.option(
    "--allow-read-tools", is_flag=True,
    help="Also pre-approve codemem's read-only tools (search, symbols, graph, memory reads) in the settings "
         "file's permissions, so Claude Code runs them without asking. Off by default; --dry-run shows the rules.",
)
@click.option(
    "--git-notes", "git_notes", is_flag=True,
    help="Also make this clone's git notes a live memory store: memories tied to a commit become notes in "
         "refs/notes/cs/<namespace>, `git fetch`/`git push` carry them (refspecs), `codemem index` merges and "
         "imports fetched ones, and a post-commit hook attaches the decisions made since the last commit.",
)
def init(project: str, dry_run: bool, undo: bool, scope: str, allow_read_tools: bool, git_notes: bool) -> None:
    """Set this project up for Claude Code: the codemem MCP server, the hooks (session start and
    end, file reads and edits, compaction, a guard on .codemem/), a CLAUDE.md section saying when
    to use which tool, and .codemem/ in .gitignore. Running it again adds nothing."""
    try:
        plan = setup.plan_undo(Path(project)) if undo else setup.plan_init(Path(project), scope, allow_read_tools=allow_read_tools)
        if undo:
            git = git_hooks.plan_git_notes_undo(Path(project))
        else:
            git = git_hooks.plan_git_notes(Path(project), plan.launcher or setup.find_launcher()) if git_notes else None
    except setup.SetupError as exc:
        raise InputError(str(exc)) from exc
    what = "init --undo" if undo else f"init ({scope} scope)"
    launcher = plan.launcher if plan.changes else None
    launched = f"commands start codemem with `{launcher.display()}` ({launcher.reason})" if launcher else None
    if dry_run:
        click.echo(setup.render_diff(plan), nl=False)
        if plan.record_changed:
            click.echo(f"(and {'remove' if plan.record is None else 'write'} {setup.RECORD_PATH}, "
                       "the record undo works from)")
        for note in plan.notes:
            click.echo(f"note: {note}")
        if launched:
            click.echo(launched)
        if git is not None:
            click.echo(git_hooks.render(git), nl=False)
            for note in git.notes:
                click.echo(f"note: {note}")
        empty = plan.empty and (git is None or git.empty)
        click.echo(f"dry run of codemem {what}: nothing changed" if not empty
                   else f"dry run of codemem {what}: nothing to change")
        return
    try:
        done = setup.apply_plan(plan)
        if git is not None:
            done += git_hooks.apply(git)
    except setup.SetupError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        raise click.ClickException(f"writing {exc.filename or 'a file'} failed: {exc.strerror or exc}") from exc
    for line in done:
        click.echo(line)
    for note in git.notes if git is not None else ():
        click.echo(f"note: {note}")
    for note in plan.notes:
        click.echo(f"note: {note}")
    if launcher:
        click.echo(launched)
        if not launcher.bare and scope == "project":
            click.echo("note: that path is this machine's; for a setup teammates share, put codemem on PATH "
                       "and run `codemem init` again (or use --scope local)")
    if undo:
        click.echo("codemem removed from this project's Claude Code setup" if done
                   else "nothing to undo: no codemem entries found")
    elif done:
        approve = " and approve the `codemem` MCP server when asked" if scope == "project" else ""
        click.echo(f"done — restart Claude Code in this project{approve}; `codemem init --undo` takes it all back")
    else:
        click.echo("already set up: nothing to change")
