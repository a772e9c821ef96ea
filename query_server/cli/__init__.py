"""The ``codemem`` command line: thin commands over the service's tools (through the project's owner).

``common`` holds the click group ``main`` and what every command shares; each command module
registers its commands on ``main`` when imported, and imports only ``common`` (``design`` also adds
``memory health`` to the group of ``memory``). ``main`` imports a command's module when the command
runs (``common.COMMAND_MODULES``), every module when the commands are listed; nothing imports the
package back.
"""

from __future__ import annotations

from query_server.cli.common import main

__all__ = ["main"]
