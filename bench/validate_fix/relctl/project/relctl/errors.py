"""The two kinds of error a command may raise (see docs/adr/0002-exit-codes.md)."""


class UsageError(Exception):
    """The command was called wrongly: exit status 2."""


class OperationFailed(Exception):
    """The operation itself failed: exit status 1."""
