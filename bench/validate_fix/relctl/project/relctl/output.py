"""Everything relctl writes to the terminal."""

from __future__ import annotations

import json
import os
import sys


def use_colour() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def result(data: object, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(data, sort_keys=True))
    else:
        print(data)


def progress(message: str) -> None:
    print(message, file=sys.stderr)
