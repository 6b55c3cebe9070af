#!/usr/bin/env bash
# Proves Evanesco works as a versioned dependency, the way users add it: clones the committed
# project into a temporary folder, tags the clone, points Examples/EvanescoExample at it with
# `.package(url: "file://...", from: "0.2.0")`, then builds and runs the example.
#   scripts/check-example.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
git clone -q "$root" "$work/evanesco"
git -C "$work/evanesco" -c user.name=ci -c user.email=ci@localhost tag 0.2.0
git -C "$root" archive HEAD Examples/EvanescoExample | tar -x -C "$work"
cd "$work/Examples/EvanescoExample"
export EVANESCO_PACKAGE_URL="file://$work/evanesco"
swift build -c release 2>&1 | tail -n 3
swift run -c release --skip-build EvanescoExample "$work/out"
for f in stacked.png portrait-blur.png backdrop.png; do
    [ -s "$work/out/$f" ] || { echo "check-example: $f was not written" >&2; exit 1; }
done
echo "check-example: the example built against a tagged clone and ran"
