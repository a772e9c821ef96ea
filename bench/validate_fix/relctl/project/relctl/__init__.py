"""relctl: the release engineering command-line tool."""
