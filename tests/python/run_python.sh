#!/usr/bin/env bash
# Runs "$@" with the Python in $1 when it has wsync installed; exit 77 (skipped) when it does not.
py=$1
shift
if ! "$py" -c "import wsync" >/dev/null 2>&1; then
  echo "SKIPPED: '$py' has no wsync (scripts/python-venv.sh makes that venv; scripts/test.sh runs it)"
  exit 77
fi
exec "$py" "$@"
