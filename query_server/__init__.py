"""The query side: one service layer with MCP, HTTP and CLI faces."""
