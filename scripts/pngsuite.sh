#!/usr/bin/env bash
# Writes PngSuite's basic images (the PNG conformance suite, 28 files: every colour type and bit
# depth, interlaced or not, palettes, transparency) into DIR (default .build/pngsuite), where
# PngSuiteTests reads them. They come from pypng's source package on PyPI, which carries them
# as code/pngsuite.py; the package's checksum is pinned. Nothing is copied into the repository.
# Idempotent: a complete DIR is left as it is.
#   scripts/pngsuite.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.build/pngsuite}
version=0.20220715.0
sha256=739c433ba96f078315de54c0db975aee537cbc3e1d0ae4ed9aab0ca1e427e2c1
if [ -d "$dest" ] && [ "$(find "$dest" -name '*.png' | wc -l)" -eq 28 ]; then exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip where there is one; otherwise PyPI's simple index read with plain Python.
fetch() {
    python3 -m pip download "pypng==$version" --no-binary :all: --no-deps -d "$work" -q && return 0
    python3 - "$version" "$work" <<'PY'
import re, sys, urllib.request
version, work = sys.argv[1], sys.argv[2]
name = f"pypng-{version}.tar.gz"
with urllib.request.urlopen("https://pypi.org/simple/pypng/", timeout=60) as r:
    page = r.read().decode()
url = next(u for u in re.findall(r'href="([^"]+)"', page) if u.split("#")[0].endswith("/" + name))
with urllib.request.urlopen(url.split("#")[0], timeout=120) as r, open(f"{work}/{name}", "wb") as f:
    f.write(r.read())
PY
}
if ! fetch >"$work/fetch.log" 2>&1; then
    echo "pngsuite: could not download pypng $version from PyPI (offline?); PngSuiteTests will say it is absent" >&2
    cat "$work/fetch.log" >&2
    exit 1
fi
archive="$work/pypng-$version.tar.gz"
echo "$sha256  $archive" | sha256sum --check --quiet - || { echo "pngsuite: pypng $version's checksum differs; not used" >&2; exit 1; }
tar -xzf "$archive" -C "$work" "pypng-$version/code/pngsuite.py"
mkdir -p "$dest.partial"
python3 - "$work/pypng-$version/code" "$dest.partial" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
import pngsuite
for name, data in pngsuite.png.items():
    with open(os.path.join(sys.argv[2], name + ".png"), "wb") as f:
        f.write(data)
print(f"pngsuite: {len(pngsuite.png)} images", file=sys.stderr)
PY
rm -rf "$dest"
mv "$dest.partial" "$dest"
