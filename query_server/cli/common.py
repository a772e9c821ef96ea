"""What every ``codemem`` command shares: the click group ``main``, the consoles, the errors, the
project handle, and running a tool of the registry (``query_server.tools``) with its result shown as
rich tables or as its exact JSON.

The command modules (``code``, ``memory``, ``design``, ...) import this one and register their
commands on ``main``; it imports none of them.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import BaseModel, ValidationError

from pipelines.discovery import DiscoveryError, resolve_project_root
from resources.settings import Settings

from query_server.cli.state_files import describe_broken_state
from query_server.paging import ToolError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

    from query_server.ownership import ProjectHandle
    from query_server.tools import Tool

console: Console  # progress, summaries of index runs, errors
out: Console  # query results (follows sys.stdout, so pipes and test runners get them)


def __getattr__(name: str) -> Console:
    """``console`` and ``out``, made when first used: rich loads then (``codemem mcp`` never
    prints, and answers its first call ~50 ms sooner without it)."""
    if name not in ("console", "out"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _console(name)


def _console(name: str) -> Console:
    """The console ``name`` (``console`` or ``out``) of this module, made on first use."""
    made = globals().get(name)
    if made is None:
        from rich.console import Console

        made = globals().setdefault(name, Console(stderr=True) if name == "console" else Console())
    return made


PHASES = {
    "discover": "Discovering files",
    "parse": "Parsing & writing",
    "resolve": "Resolving cross-file edges",
    "embed": "Computing dense vectors",
}
"""The index run's progress phases as the progress bars name them."""


class InputError(click.ClickException):
    """Bad input (invalid arguments, refused query, unknown symbol): exit status 2, no traceback."""

    exit_code = 2


def field_help(model: type[BaseModel], field: str, more: str = "") -> str:
    """The help of an option that sets ``model``'s ``field``: the field's description (written once,
    for the MCP tool, the HTTP route and the CLI), then ``more`` (e.g. "Repeatable.")."""
    description = model.model_fields[field].description
    if not description:
        raise ValueError(f"{model.__name__}.{field} has no description to use as an option's help")
    return f"{description} {more}" if more else description


def settings_for(project: str) -> Settings:
    """The settings of the project at or above ``project`` (no project, or a setting of the
    environment that is not valid: exit 2, naming the variable)."""
    try:
        root = resolve_project_root(Path(project))
    except DiscoveryError as exc:
        raise InputError(str(exc)) from exc
    try:
        return Settings(project_root=root)
    except ValidationError as exc:
        raise InputError(settings_problem(exc)) from exc


def settings_problem(exc: ValidationError) -> str:
    """What is wrong with the settings, one line per setting, each named by its variable."""
    lines = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error.get("loc") else "settings"
        lines.append(f"CODEMEM_{field.upper()}={error.get('input')!s}: {error['msg']} — fix it or unset it "
                     "(the settings are listed in .env.example)")
    return "\n".join(lines)


def open_handle(project: str, settings: Settings | None = None) -> ProjectHandle:
    """The project's stores (its ``settings`` when the caller has them already), owned by this
    process or reached through their owner; a failure to open them is one line naming the
    corrupted state file, when one is."""
    from query_server.ownership import ProjectHandle  # lazy: keeps `codemem --help` fast

    settings = settings or settings_for(project)
    try:
        return ProjectHandle(settings)
    except ToolError as exc:
        raise click.ClickException(str(exc)) from exc
    except Exception as exc:
        broken = describe_broken_state(settings.resolved_state_dir())
        if broken:
            raise click.ClickException(f"opening the project's stores failed: {broken}") from exc
        raise failure("opening the project's stores", exc) from exc


def failure(what: str, exc: Exception) -> click.ClickException:
    """``what`` failed with ``exc``, as the CLI says it (``query_server.errors.cli_error``): bad input
    or a refusal exits 2 with its message, anything else exits 1 in one line (the traceback goes to
    the log at debug level)."""
    from query_server.errors import cli_error

    status, message = cli_error(what, exc)
    return InputError(message) if status == 2 else click.ClickException(message)


LOG_FILE_BYTES = 10 * 1024 * 1024
"""A server log file is rotated at this size (three old files kept)."""


def configure_logging(default_level: str = "WARNING", log_file: Path | None = None) -> None:
    """JSON log lines; ``CODEMEM_LOG_LEVEL`` overrides the command's default level (the servers log
    every tool call at INFO; one-shot commands only warnings).

    Without ``log_file`` the lines go to stderr. With it (``codemem mcp``: Claude Code files every
    line a stdio server writes on stderr as an error) they go to that file, private and rotated,
    and only errors also reach stderr.
    """
    structure_log_lines(route_log_lines(default_level, log_file))


def structure_log_lines(level: str) -> None:
    """The structlog half of ``configure_logging``: every codemem logger writes JSON lines at
    ``level`` into the handlers ``route_log_lines`` set up."""
    import logging

    from query_server.structlog_import import import_structlog

    import_structlog()  # (when nothing imported it yet: `codemem mcp` does it here, its model loading)
    import structlog

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
    )


def route_log_lines(default_level: str = "WARNING", log_file: Path | None = None) -> str:
    """The standard library's half of ``configure_logging`` (where lines go, at which level; no
    structlog import): ``codemem mcp`` routes what its model's loading logs to its file before it
    imports structlog. Returns the level."""
    import logging
    from logging.handlers import RotatingFileHandler

    level = os.environ.get("CODEMEM_LOG_LEVEL", default_level).upper()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        from resources.private_files import make_private_dir, make_private_file

        make_private_dir(log_file.parent)
        make_private_file(log_file)
        errors_only = handlers[0]
        errors_only.setLevel(logging.ERROR)
        handlers.insert(0, RotatingFileHandler(log_file, maxBytes=LOG_FILE_BYTES, backupCount=3, encoding="utf-8"))
    logging.basicConfig(level=level, format="%(message)s", handlers=handlers, force=True)
    return level


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """Turn SIGTERM into a normal exit so the stores close (the embedded graph server included)."""
    raise SystemExit(128 + signum)


COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("duplicates", "graph", "health", "hook", "index", "query", "related", "search", "status", "symbol"),
                    ("code",)),
    "mcp": ("servers",), "serve": ("servers",),
    **dict.fromkeys(("check", "design-context", "impact", "record-tests", "trace", "validate-fix"), ("design",)),
    **dict.fromkeys(("backup", "export", "import", "normalize", "rebuild-projections", "restore", "stats"), ("memory",)),
    "memory": ("memory", "design"),  # design adds `memory health` to the group
    "eval": ("eval",), "init": ("init",), "notes": ("notes",), "review": ("notes",), "repair": ("repair",),
    "ui": ("ui",), "watch": ("pipeline",), "which-partition": ("pipeline",),
}
"""The modules of ``query_server.cli`` that register each command of ``main``. A command's modules
are imported when it runs: ``codemem index`` loads neither the design, memory nor UI commands
(~0.15 s of a 2-core machine's start). ``tests/query_server/cli/test_lazy_commands.py`` checks this
table against what the modules register."""


class LazyGroup(click.Group):
    """``main``: imports the module of a command when the command is looked up, all of them when
    they are listed (``--help``, completion, a misspelt command's suggestions)."""

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:  # type: ignore[override]
        if cmd_name not in self.commands:
            for module in COMMAND_MODULES.get(cmd_name, ()):
                importlib.import_module(f"query_server.cli.{module}")
        return super().get_command(ctx, cmd_name)  # type: ignore[arg-type]

    def list_commands(self, ctx: click.Context | None) -> list[str]:  # type: ignore[override]
        load_all_commands()
        return super().list_commands(ctx)  # type: ignore[arg-type]


def load_all_commands() -> None:
    """Import every command module, so that ``main.commands`` holds every command."""
    for module in sorted({m for modules in COMMAND_MODULES.values() for m in modules}):
        importlib.import_module(f"query_server.cli.{module}")


@click.group(cls=LazyGroup)
@click.version_option(package_name="codemem")
@click.pass_context
def main(ctx: click.Context) -> None:
    """codemem — long-term memory and codebase intelligence for Claude Code."""
    if ctx.invoked_subcommand != "mcp":  # `codemem mcp` logs to its file, configured once its model is loading
        configure_logging()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


ToolCall = Callable[..., Any]
"""``run(tool, request=None)``: one tool call on an open handle, with the CLI's errors (``call``)."""


@contextmanager
def tool_calls(project: str) -> Iterator[ToolCall]:
    """Several tool calls on one handle (the stores opened once): yields ``run(tool, request)``,
    each call's failure turned into the CLI's error as ``call`` does; the handle closes after."""
    handle = open_handle(project)

    def run(tool: Tool, request: BaseModel | None = None) -> Any:
        try:
            return handle.call(tool, *([request] if request is not None else []))
        except Exception as exc:
            raise failure(tool.name, exc) from exc

    try:
        yield run
    finally:
        handle.close()


def call(project: str, tool: Tool, request: BaseModel | None = None) -> Any:
    """Run one tool of the registry for the project (through its owner) with CLI-friendly errors.

    A refusal of the tool (``ToolError``) or invalid input exits 2 with its message; any other
    failure exits 1 with a one-line message (see ``failure``).
    """
    with tool_calls(project) as run:
        return run(tool, request)


def make_input(model: type[BaseModel], **fields: Any) -> BaseModel:
    """Build a tool input, turning validation errors into one clear line (exit 2)."""
    from resources.schemas.tools import describe_validation_error

    try:
        return model(**fields)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc)) from exc


Renderer = Callable[[Any], Iterable["RenderableType"]]


def query_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every query command has: ``--project`` and ``--json``."""
    command = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout (for scripts).")(command)
    return click.option("--project", default=".", show_default=True, help="The indexed repository.")(command)


def show(project: str, tool: Tool, request: BaseModel | None, as_json: bool, render: Renderer) -> Any:
    """Run ``tool`` and print its result: rich tables on stdout, or its exact JSON with ``--json``."""
    result = call(project, tool, request)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        for renderable in render(result):
            _console("out").print(renderable)
    return result


def parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``key=value`` pairs; a value is JSON when it parses as JSON, else the string itself."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--param {pair!r}: expected key=value, e.g. --param name=merge_settings or --param limit=5")
        try:
            params[key.strip()] = json.loads(raw)
        except ValueError:
            params[key.strip()] = raw
    return params


def cell(value: Any) -> Text:
    """A table cell: strings verbatim (never rich markup), other values as JSON, None empty."""
    from rich.text import Text

    if value is None:
        return Text("")
    if isinstance(value, Text):
        return value
    if isinstance(value, str):
        return Text(value)
    return Text(json.dumps(value, ensure_ascii=False, default=str))


def result_table(*columns: str, **options: Any) -> Table:
    """A result table whose cells fold long names and paths instead of cutting them."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title_justify="left", **options)
    for column in columns:
        table.add_column(Text(column), overflow="fold")
    return table


def location(path: str | None, line: int | None) -> Text:
    """``path:line`` (just the path without a line)."""
    from rich.text import Text

    return Text(f"{path or ''}:{line}" if line else (path or ""))


def key_values(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column table: the keys in bold, the values as cells."""
    from rich.text import Text

    table = result_table("", "", title=Text(title), show_header=False)
    table.columns[0].style = "bold"
    for key, value in rows:
        table.add_row(key, cell(value))
    return table
