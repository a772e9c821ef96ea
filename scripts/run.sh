#!/usr/bin/env bash
# Set up codemem, index a repository (default: this one) and serve it over MCP (HTTP, loopback).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
target="$(cd "${1:-$here}" && pwd)"
"$here/scripts/setup.sh"
"$here/.venv/bin/codemem" index "$target"
exec "$here/.venv/bin/codemem" serve --project "$target" --port "${CODEMEM_PORT:-8765}"
