# shellcheck shell=bash
# Create (or reuse) the project's virtualenv and install sluicegate into it.
# Sourced by scripts/test and scripts/dev-cluster; sets $PY.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SLUICEGATE_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: sluicegate needs Python 3.11 or newer ($PYTHON is $("$PYTHON" --version 2>&1))" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    # Debian ships venv separately.
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      rm -rf "$VENV"
      "$PYTHON" -m venv "$VENV"
    else
      echo "error: '$PYTHON -m venv' failed; install python3-venv (sudo apt-get install python3-venv)" >&2
      exit 2
    fi
  fi
fi
PY="$VENV/bin/python"
# The editable install is redone only when pyproject.toml changed since, or
# when extras not installed yet are asked for: a restart of dev-cluster or a
# targeted test run then starts at once.
STAMP="$VENV/.sluicegate-installed"
EXTRAS="${SLUICEGATE_EXTRAS:-}"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ] || ! grep -qxF "$EXTRAS" "$STAMP" \
    || ! "$PY" -c 'import sluicegate' 2>/dev/null; then
  "$PY" -m pip install -q --disable-pip-version-check -e "$ROOT$EXTRAS" 2>&1 | grep -v "^WARNING: Location" || true
  { [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ] || cat "$STAMP"; echo "$EXTRAS"; echo ""; } \
    | sort -u > "$STAMP.tmp" && mv "$STAMP.tmp" "$STAMP"
fi
"$PY" -c 'import sluicegate' || { echo "error: installing sluicegate into $VENV failed" >&2; exit 2; }
