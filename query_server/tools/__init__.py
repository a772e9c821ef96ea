"""The tool registry: one ``Tool`` entry per service operation, the only place a tool is declared.

The MCP tools, the HTTP routes, the owner's loopback RPC and the CLI commands all come from it.
Adding a tool is its input and result models (``resources/schemas/``), its service function, and
one entry in the family module here (``code``, ``memory`` or ``design``).
"""

from __future__ import annotations

from query_server.tools.code import CODE_TOOLS
from query_server.tools.design import DESIGN_TOOLS
from query_server.tools.memory import MEMORY_TOOLS
from query_server.tools.registry import KEYED, NATURAL, ONCE, READ, RetryPolicy, Tool

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (*CODE_TOOLS, *MEMORY_TOOLS, *DESIGN_TOOLS)}
"""Name -> tool, in the order MCP clients list them (code, memory, design), internal tools last of each family."""

__all__ = ["KEYED", "NATURAL", "ONCE", "READ", "TOOLS", "RetryPolicy", "Tool", "mcp_tools", "routed_tools", "tool"]


def tool(name: str) -> Tool:
    """The tool called ``name`` (a name that crossed a process boundary or came from a caller)."""
    try:
        return TOOLS[name]
    except KeyError:
        raise KeyError(f"unknown tool {name!r} — the tools are: {', '.join(sorted(TOOLS))}") from None


def mcp_tools() -> list[Tool]:
    """The tools offered to MCP clients."""
    return [entry for entry in TOOLS.values() if entry.is_mcp]


def routed_tools() -> list[Tool]:
    """The tools with a ``POST /tools/<name>`` route."""
    return [entry for entry in TOOLS.values() if entry.route is not None]
