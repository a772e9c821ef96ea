"""``Schema``: the base of every codemem pydantic model.

Its models are built on first use, not at import (``defer_build``): building the validators and
serializers of the ~100 models of ``resources.schemas`` took ~0.1 s of every process start, most of
it for models the process never uses — a hook's relay, a no-change ``codemem index`` and the first
call of ``codemem mcp`` each use a handful.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Schema(BaseModel):
    """A pydantic model built when first used (validated, dumped or asked for its JSON schema)."""

    model_config = ConfigDict(defer_build=True)
