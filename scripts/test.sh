#!/usr/bin/env bash
# Set up codemem with its test extras and run the default test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
exec .venv/bin/python -m pytest "$@"
