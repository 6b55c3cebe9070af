#!/usr/bin/env bash
# Installs the Debian packages Evanesco builds, tests and runs with, if any are missing.
# Idempotent and quiet when everything is present. Needs root (or sudo) only to install.
set -euo pipefail
packages=(pkg-config libturbojpeg0-dev libpng-dev zlib1g-dev libdeflate-dev libheif-dev libheif-examples libtiff-dev ffmpeg opencv-data python3 procps
          chromium chromium-driver    # a real browser and its WebDriver server, for the studio's browser tests
          clang-format nodejs         # the C kernels' format and the page's scripts, checked by scripts/check-layout.py
          libraw-dev                  # camera raw files (LibRaw, libraw_r)
          dcraw libimage-exiftool-perl rawtherapee  # others' readers of the DNGs we write, in the raw tests
          postgresql)                 # the batch queue's server, for its integration tests (scripts/with-postgres.sh)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "install-deps: installing ${missing[*]}" >&2
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null || { echo "install-deps: Swift 6 is not on PATH; install it from swift.org first" >&2; exit 1; }
# rawpy (LibRaw's Python binding) in .build/raw-venv, the third reader of our DNGs in RawInteropTests.
"$(dirname "$0")/raw-venv.sh" || echo "install-deps: rawpy is missing; RawInteropTests will say so" >&2
# PngSuite's images for PngSuiteTests (from PyPI; without a network the test says it is absent).
"$(dirname "$0")/pngsuite.sh" || echo "install-deps: PngSuite's images are missing; PngSuiteTests will be skipped" >&2
