#!/usr/bin/env bash
# Makes the venv of the verl backend's test (tests/verl): .venv-verl/ (or $WSYNC_VERL_VENV), with
# verl 0.9.1 from PyPI installed without its dependencies, and only the packages that importing
# verl.checkpoint_engine and verl.workers.engine_workers needs on a CPU (ray, tensordict,
# transformers, omegaconf, hydra-core, codetiming, orjson, fastapi, uvicorn, datasets, pillow).
#
# It is layered on the Python tests' venv (.venv-test, or $WSYNC_TEST_VENV, made by
# scripts/python-venv.sh, which this runs when that venv has no torch): a .pth file puts that venv's
# site-packages after this one's, so torch, numpy and pytest are not installed twice. Why not
# .venv-test itself: verl's wheel installs top-level packages named `tests` and `scripts` into
# site-packages, and its dependencies add about 70 packages (ray, transformers, fastapi, ...);
# .venv-test stays what a user of the wsync wheel has.
#
# wsync is not installed here: the test imports it from this checkout (PYTHONPATH) with the library
# of the build (WSYNC_LIBRARY), as tests/verl/run.sh sets.
# Idempotent: a venv this script finished (it leaves $VENV/.wsync-verl-ready naming the release) is
# left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${WSYNC_VERL_VENV:-$PWD/.venv-verl}
BASE=${WSYNC_TEST_VENV:-$PWD/.venv-test}
VERL_VERSION=0.9.1
start=$(date +%s)

if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.wsync-verl-ready" 2>/dev/null)" = "verl==$VERL_VERSION" ]; then
  echo "verl-setup: $VENV already has verl $VERL_VERSION"
  exit 0
fi
rm -f "$VENV/.wsync-verl-ready"
if ! [ -x "$BASE/bin/python" ] || ! "$BASE/bin/python" -c "import torch, numpy, pytest" >/dev/null 2>&1; then
  scripts/python-venv.sh
fi
base_site=$("$BASE/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
[ -x "$VENV/bin/python" ] || "$("$BASE/bin/python" -c "import sys; print(sys.executable)")" -m venv "$VENV"
site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$base_site" >"$site/_wsync_test_venv.pth"

PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
# verl's own pins for these (its wheel's METADATA): tensordict 0.8..0.10 but not 0.9.0, transformers
# 5.5.3..5.10.x but not 5.6.0, ray 2.41 or later. pip then says that verl requires packages that are
# not installed (accelerate, peft, wandb, ...): on purpose, the checkpoint engines do not import them.
"${PIP[@]}" --no-deps "verl==$VERL_VERSION"
"${PIP[@]}" "ray>=2.41.0" "tensordict>=0.8.0,<=0.10.0,!=0.9.0" "transformers>=5.5.3,<5.11,!=5.6.0" \
  omegaconf hydra-core codetiming orjson fastapi uvicorn datasets pillow
"$VENV/bin/python" -c "import torch, pytest, verl, verl.checkpoint_engine, verl.workers.engine_workers
print('verl-setup: verl', verl.__version__, 'torch', torch.__version__)"
echo "verl==$VERL_VERSION" >"$VENV/.wsync-verl-ready"
echo "verl-setup: $VENV ready in $(( $(date +%s) - start )) s ($(du -sh "$VENV" | cut -f1))"
