"""Configuration: config.toml, then RELCTL_* variables, then options; the token from env or keyring."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import keyring


def config_path() -> Path:
    base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return base / "relctl" / "config.toml"


def load() -> dict:
    path = config_path()
    values = tomllib.loads(path.read_text()) if path.exists() else {}
    for key, value in os.environ.items():
        if key.startswith("RELCTL_") and key != "RELCTL_TOKEN":
            values[key.removeprefix("RELCTL_").lower()] = value
    return values


def api_token() -> str | None:
    return os.environ.get("RELCTL_TOKEN") or keyring.get_password("relctl", "api-token")
