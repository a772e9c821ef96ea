"""CI check for migrations/: node-pg-migrate file names, and a down migration in every file."""

from __future__ import annotations

import re
import sys
from pathlib import Path

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
NAME = re.compile(r"^\d{13}_[a-z0-9-]+\.(js|ts|sql)$")
DOWN = re.compile(r"export\s+(const|async function|function)\s+down\b|^--\s*Down Migration", re.MULTILINE)


def problems(folder: Path = MIGRATIONS) -> list[str]:
    found = []
    for path in sorted(folder.iterdir()):
        if not NAME.match(path.name):
            found.append(f"{path.name}: not named <timestamp>_<kebab-name>")
        elif not DOWN.search(path.read_text()):
            found.append(f"{path.name}: no down migration")
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(f"check_migrations: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
