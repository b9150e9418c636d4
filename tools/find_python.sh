#!/bin/sh
# Print the path of a Python the course can use (3.12 or 3.13, newest first), or say in one
# sentence what to install and exit 1. Used by `make` before .venv exists:
#   PYTHON=/path/to/python sh tools/find_python.sh    (that one only, checked)
#   VENV_PYTHON=.venv/bin/python sh tools/find_python.sh  (an existing environment's, where suitable)
# A candidate counts only if it runs and answers with a suitable version: pyenv's shims on PATH
# (python3.13, say) exist for every version pyenv has, and refuse to run one that is not selected.
WANT_LOW=12 WANT_HIGH=13

suitable() {
  "$1" -c "import sys; sys.exit(0 if (3, $WANT_LOW) <= sys.version_info[:2] <= (3, $WANT_HIGH) else 1)" \
    >/dev/null 2>&1
}

if [ -n "${PYTHON:-}" ]; then
  if suitable "$PYTHON"; then
    command -v "$PYTHON" 2>/dev/null || printf '%s\n' "$PYTHON"
    exit 0
  fi
  found=$("$PYTHON" --version 2>/dev/null | head -n 1)
  echo "error: PYTHON=$PYTHON is not Python 3.$WANT_LOW or 3.$WANT_HIGH (${found:-it does not run}); install one of those (python.org, your package manager, pyenv or uv) or leave PYTHON unset to let make look for it." >&2
  exit 1
fi

# An environment already built with a suitable Python keeps it (make passes its python as VENV_PYTHON).
if [ -n "${VENV_PYTHON:-}" ] && suitable "$VENV_PYTHON"; then
  printf '%s\n' "$VENV_PYTHON"
  exit 0
fi

pyenv_root=$( (pyenv root) 2>/dev/null || printf '%s' "${PYENV_ROOT:-$HOME/.pyenv}")
for minor in $WANT_HIGH $WANT_LOW; do
  # On PATH first, then pyenv's own versions (newest patch release first), then uv's and the usual places.
  for candidate in "python3.$minor" \
      $(ls -d "$pyenv_root"/versions/3."$minor".*/bin/python3."$minor" 2>/dev/null | sort -t. -k3,3nr) \
      $(ls -d "$HOME"/.local/share/uv/python/cpython-3."$minor".*/bin/python3."$minor" 2>/dev/null | sort -r) \
      "/usr/local/bin/python3.$minor" "/usr/bin/python3.$minor" "/opt/homebrew/bin/python3.$minor"; do
    if suitable "$candidate"; then
      command -v "$candidate" 2>/dev/null || printf '%s\n' "$candidate"
      exit 0
    fi
  done
done
for candidate in python3 python; do
  if suitable "$candidate"; then
    command -v "$candidate"
    exit 0
  fi
done
echo "error: the course needs Python 3.$WANT_HIGH or 3.$WANT_LOW and none was found (on PATH, under pyenv or uv); install Python 3.$WANT_HIGH (python.org, your package manager, 'pyenv install 3.$WANT_HIGH' or 'uv python install 3.$WANT_HIGH'), or run make with PYTHON=/path/to/python3.$WANT_HIGH." >&2
exit 1
