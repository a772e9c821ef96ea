"""Pseudonymisation of operators' personal data (docs/adr/0007)."""

from __future__ import annotations

import hashlib
import hmac
from functools import cache

import hvac


@cache
def _salt() -> bytes:
    return hvac.Client().secrets.kv.read_secret_version(path="tidewater/pii")["data"]["data"]["salt"].encode()


def pseudonymise(value: str) -> str:
    return hmac.new(_salt(), value.strip().lower().encode(), hashlib.sha256).hexdigest()
