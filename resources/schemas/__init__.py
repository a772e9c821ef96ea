"""Pydantic models: the one definition of each concept used by storage, MCP and HTTP."""
