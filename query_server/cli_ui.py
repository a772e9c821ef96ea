"""``codemem ui``: the Dagster webserver and daemon for a project."""

from __future__ import annotations
