"""``codemem mcp`` writes its log to ``.codemem/logs/mcp.log`` and keeps stderr for errors: Claude
Code files every line a stdio server writes on stderr as an error (issue 18, item 5)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.reliability.children import McpStdioClient


def test_stdio_server_logs_to_the_state_dir_and_keeps_stderr_for_errors(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "billing.py").write_text("def invoice_total(lines):\n    return sum(lines)\n")
    stderr = tmp_path / "stderr.txt"
    client = McpStdioClient(project, log=stderr)
    try:
        assert client.initialize()
        added = client.tool("memory_add", {"memory_type": "session", "content": "Invoices are summed line by line."})
        assert added is not None and added["status"] == "created"
        refused = client.tool_result("memory_get", {"memory_id": "no-such-id", "memory_type": "session"})
        assert refused is not None and refused.get("isError")  # a refusal is the client's answer, not a server error
    finally:
        client.close()
    log = project / ".codemem" / "logs" / "mcp.log"
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("level") == "info" for line in lines), lines[:5]  # every call is logged at INFO, here
    assert "memory_add" in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    noise = [line for line in stderr.read_text().splitlines() if line.strip()]
    assert all('"level": "error"' in line or '"level": "critical"' in line for line in noise), noise[:5]
