#!/usr/bin/env bash
# Makes .build/raw-venv, a Python virtual environment with rawpy (LibRaw's binding, a wheel that
# bundles its own LibRaw) and numpy, where RawInteropTests reads back the DNGs Evanesco writes. It
# sees the system Python's packages too (OpenCV, from ../shared/bench/setup.sh), which
# Benchmarks/raw-finish-vs-rawpy.py needs beside rawpy.
# Idempotent: an environment that imports rawpy is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/raw-venv
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import rawpy, numpy" 2>/dev/null; then exit 0; fi
python3 -m venv --system-site-packages "$venv" 2>/dev/null || {
    # Debian's python3 needs its venv package first.
    sudo=""; [ "$(id -u)" != 0 ] && sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv --system-site-packages "$venv"
}
"$venv/bin/python" -m pip install -q --disable-pip-version-check "rawpy==0.28.0" "numpy<3"
