# Sourced by the other scripts: make sure .venv exists and holds the project with its dev extra.
# Re-installs only when pyproject.toml changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "contrastive_nb needs Python 3.10 or newer; '$PYTHON' is $("$PYTHON" --version 2>&1). Set PYTHON=/path/to/python3.x." >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "Creating the virtual environment in .venv ..."
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.installed-$(cksum < pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ]; then
  echo "Installing contrastive_nb and its dev tools into .venv (first run: a few minutes) ..."
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e ".[dev]"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
