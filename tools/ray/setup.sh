#!/usr/bin/env bash
# Installs what `proxima sweep --ray` needs: a Python virtual environment with
# the pinned Ray, at $PROXIMA_RAY_VENV (default ~/.cache/proxima/ray-venv),
# which the sweep uses unless given --ray-python. Idempotent: an environment
# that already has the pinned version is left as it is. Installs python3 and
# python3-venv with apt when they are missing (CI runs as root on Debian).
set -euo pipefail

RAY_VERSION="2.60.0"
venv="${PROXIMA_RAY_VENV:-$HOME/.cache/proxima/ray-venv}"

if ! /usr/bin/env python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y python3 python3-venv
fi

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  echo "ray $RAY_VERSION ready in $venv"
  exit 0
fi

rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "ray==$RAY_VERSION"
echo "ray $RAY_VERSION installed in $venv"
