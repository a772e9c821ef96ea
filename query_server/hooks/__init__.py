"""Claude Code hooks (stdlib only: each hook process must start at the interpreter's floor)."""
