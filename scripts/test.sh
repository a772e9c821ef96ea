#!/usr/bin/env bash
# Set up codemem with its test extras and run the default test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# The Compose v2 CLI for `docker compose config` (tests/test_deploy.py), from Debian, into .tools/.
# Best effort here (the test skips with the reason without it); CI requires it.
scripts/install-compose.sh || echo "test.sh: the docker compose config test will be skipped (see above)" >&2
# PostgreSQL's server binaries for the PostgreSQL stores' tests (a throwaway cluster, no service).
# Best effort here (those tests skip with the reason without them); CI requires them.
scripts/install-postgres.sh || echo "test.sh: the PostgreSQL tests will be skipped (see above)" >&2
# Two workers, one test file each at a time (module fixtures stay in one process): the suite waits
# on subprocesses and servers as much as it computes, so 2 workers take ~12 min on 2 cores where
# one took ~20. CODEMEM_TEST_WORKERS=0 runs it in one process.
workers="${CODEMEM_TEST_WORKERS:-2}"
if [ "$workers" = "0" ]; then
  exec .venv/bin/python -m pytest "$@"
fi
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile "$@"
