"""The ``codemem`` console script.

``codemem hook <Event>`` runs on every Claude Code tool call, so it must answer in a few
milliseconds: it imports only ``query_server.hooks.dispatch`` and the hook module of the event
(standard library only), never the click/rich CLI, pydantic or the stores. Every other command
goes to ``query_server.cli:main``.
"""

import sys


def main() -> None:
    """Dispatch ``codemem hook …`` to the fast hook module and everything else to the CLI."""
    argv = sys.argv[1:]
    if argv and argv[0] == "hook":
        from query_server.hooks.dispatch import main as hook_main

        sys.exit(hook_main(argv[1:]))
    from query_server.cli import main as cli_main

    sys.exit(cli_main())


if __name__ == "__main__":
    main()
