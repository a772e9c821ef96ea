"""The enterprise memory scope: an organisation's memories, opt-in (seed 002, US-6, FR-006..FR-010).

Off unless turned on. An organisation turns it on, and names the shared directory its ledger lives
in, through the environment of every codemem process — usually in the ``env`` block of Claude
Code's managed settings, which Claude Code passes to the MCP server and the hooks it starts:

* ``CODEMEM_ENTERPRISE_SCOPE=1`` (seed 002's ``scopes.enterprise.enabled: true``);
* ``CLAUDE_MEMORY_ENTERPRISE_PATH=/srv/shared/claude-memory`` (or ``CODEMEM_ENTERPRISE_DIR``).

A ``codemem`` run from a terminal is not started by Claude Code, so a variable missing from the
environment is read from the managed settings file itself (``env`` block; Linux
``/etc/claude-code/managed-settings.json``, macOS ``/Library/Application Support/ClaudeCode/``;
``CODEMEM_MANAGED_SETTINGS`` names another). The environment wins over the file.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import structlog

from resources.settings import Settings

log = structlog.get_logger("codemem.memory_scopes")

ENABLE_VARIABLE = "CODEMEM_ENTERPRISE_SCOPE"
PATH_VARIABLE = "CLAUDE_MEMORY_ENTERPRISE_PATH"
MANAGED_SETTINGS = {
    "linux": Path("/etc/claude-code/managed-settings.json"),
    "darwin": Path("/Library/Application Support/ClaudeCode/managed-settings.json"),
    "win32": Path("C:/ProgramData/ClaudeCode/managed-settings.json"),
}
"""Where Claude Code reads managed (organisation) settings, per platform."""
_TRUE = frozenset({"1", "true", "yes", "on"})
HOW_TO_ENABLE = (
    f"an organisation turns it on with {ENABLE_VARIABLE}=1 and {PATH_VARIABLE}=<shared directory> in the "
    "environment (usually the env block of Claude Code's managed-settings.json)"
)


class ScopeUnavailableError(ValueError):
    """A memory scope that cannot be written here; the message says why and what to do."""


@dataclass(frozen=True)
class EnterpriseLocation:
    """Whether the enterprise scope is on, and its directory.

    Attributes:
        enabled: Turned on (``CODEMEM_ENTERPRISE_SCOPE``).
        directory: The shared directory of its ledger (``CLAUDE_MEMORY_ENTERPRISE_PATH``), or None.
        source: Where the settings were read: ``environment``, the managed settings file's path, or
            both joined by `` + ``.
    """

    enabled: bool
    directory: Path | None
    source: str

    def unavailable(self) -> str | None:
        """Why the scope cannot be used (None when it can): off, no directory, or the directory unreachable."""
        if not self.enabled:
            return f"the enterprise memory scope is disabled (the default) — {HOW_TO_ENABLE}"
        if self.directory is None:
            return (f"the enterprise memory scope is enabled ({self.source}) but no directory is set — set "
                    f"{PATH_VARIABLE} to the organisation's shared memory directory")
        if not self.directory.is_dir():
            return (f"the enterprise memory directory {self.directory} is unreachable (not a directory, or not "
                    f"mounted) — enterprise memories are skipped until it is; check {PATH_VARIABLE} ({self.source})")
        return None


def managed_settings_path(settings: Settings) -> Path | None:
    """Claude Code's managed settings file on this platform (or the configured one)."""
    if settings.managed_settings is not None:
        return settings.managed_settings.expanduser()
    return MANAGED_SETTINGS.get(sys.platform)


def _managed_env(path: Path | None) -> dict[str, str]:
    """The ``env`` block of the managed settings file; empty when it is absent or unreadable (logged)."""
    if path is None or not path.is_file():
        return {}
    try:
        env = json.loads(path.read_text(encoding="utf-8")).get("env") or {}
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("managed settings not read", path=str(path), error=str(exc))
        return {}
    return {str(key): str(value) for key, value in env.items()} if isinstance(env, dict) else {}


def enterprise_location(settings: Settings) -> EnterpriseLocation:
    """Where the enterprise scope stands for this process (environment first, then managed settings)."""
    enabled, directory = settings.enterprise_scope, settings.enterprise_dir
    enabled_here = "enterprise_scope" in settings.model_fields_set  # the environment (or the caller) said
    sources = ["environment"] if enabled_here or directory is not None else []
    if not enabled_here or directory is None:
        path = managed_settings_path(settings)
        managed = _managed_env(path)
        if not enabled_here and ENABLE_VARIABLE in managed:
            enabled = managed[ENABLE_VARIABLE].strip().lower() in _TRUE
            sources.append(str(path))
        if directory is None and managed.get(PATH_VARIABLE, "").strip():
            directory = Path(managed[PATH_VARIABLE].strip())
            sources.append(str(path))
    resolved = directory.expanduser().resolve() if directory is not None else None
    return EnterpriseLocation(enabled, resolved, " + ".join(dict.fromkeys(sources)) or "default")
