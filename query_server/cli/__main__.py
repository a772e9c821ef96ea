"""``python -m query_server.cli``: the command line with every command."""

from query_server.cli import main

if __name__ == "__main__":
    main()
