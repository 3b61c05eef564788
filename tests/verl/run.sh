#!/usr/bin/env bash
# ctest verl.checkpoint_engine: tests/verl with the venv scripts/verl-setup.sh makes (.venv-verl, or
# $WSYNC_VERL_VENV), wsync imported from this checkout (bindings/python) with the library of the
# build given as $1 (its plugins are the wsync/ folder beside it). Skipped (exit 77) when that venv
# has no verl: run scripts/verl-setup.sh first (a verl that is there but does not import fails the
# test). Extra arguments go to pytest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib=$1
shift
venv=${WSYNC_VERL_VENV:-$root/.venv-verl}
if ! [ -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import importlib.metadata as m; m.version('verl')" \
     >/dev/null 2>&1; then
  echo "SKIPPED: '$venv' has no verl (scripts/verl-setup.sh makes it)"
  exit 77
fi
export WSYNC_LIBRARY=$lib PYTHONPATH=$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}
exec "$venv/bin/python" -m pytest -q -s -p no:cacheprovider "$here" "$@"
