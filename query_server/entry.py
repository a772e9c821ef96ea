"""The ``codemem`` console script.

``codemem hook <Event>`` runs on every Claude Code tool call, so it must answer in a few
milliseconds: it imports only ``query_server.hooks.relay`` (which asks the project's server),
else ``query_server.hooks.dispatch`` and the hook module of the event (standard library only),
never the click/rich CLI, pydantic or the stores. Every other command goes to
``query_server.cli:main``; ``codemem index`` first starts the process that records its Dagster run
(``pipelines.dagster.recorder``), which loads Dagster meanwhile.
"""

import sys


def main() -> None:
    """Dispatch ``codemem hook …`` to the fast hook module and everything else to the CLI."""
    argv = sys.argv[1:]
    if argv and argv[0] == "hook":
        from query_server.hooks.relay import run_and_exit

        run_and_exit(argv[1:])
    if argv and argv[0] == "mcp" and not {"--help", "-h"} & set(argv):
        from query_server.import_phase import begin_import_phase

        begin_import_phase()  # ended by the command once the server's modules are in
        # initialize and tools/list are answered before the MCP SDK is even imported
        from query_server.mcp_front import start_front

        start_front()
    if argv and argv[0] == "index":
        import atexit
        import gc

        # Python's exit collects every object an index run left (~0.1 s of a small run): the
        # stores are closed and the output written by then, so freeze them instead (runs last).
        atexit.register(gc.freeze)
    if argv and argv[0] == "index" and not {"--plain", "--reembed", "--help", "-h"} & set(argv):
        # Dagster takes seconds to load: the recorder of the run loads it while the CLI loads (an
        # index with nothing to do lets it go, ``query_server.code.unchanged``)
        from pipelines.dagster.recorder import prestart

        prestart()
    if not (argv and argv[0] == "mcp"):  # (`codemem mcp` imports it once its model is loading)
        from query_server.structlog_import import import_structlog

        import_structlog()  # first: without the rich modules it would load and never use
    from query_server.cli import main as cli_main

    sys.exit(cli_main())


if __name__ == "__main__":
    main()
