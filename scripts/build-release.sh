#!/usr/bin/env bash
# The release build, in one place: every script and the README call this. The command-line tool
# and the benchmarks are linked with the Swift runtime and Foundation (--static-swift-stdlib),
# so they start fast and run on a machine without the toolchain's libraries.
#   scripts/build-release.sh [PRODUCT...]      (default: evanesco)
set -euo pipefail
cd "$(dirname "$0")/.."
products=("$@"); [ ${#products[@]} -gt 0 ] || products=(evanesco)
for p in "${products[@]}"; do
    swift build -c release --static-swift-stdlib --product "$p"
done
