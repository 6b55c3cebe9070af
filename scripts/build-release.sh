#!/usr/bin/env bash
# The release build, in one place: every script and the README call this. The command-line tool
# and the benchmarks are linked with the Swift runtime and Foundation (--static-swift-stdlib),
# so they start fast and run on a machine without the toolchain's libraries.
#   scripts/build-release.sh [PRODUCT...]      (default: evanesco)
# EVANESCO_RELEASE_BUILT=1 says the release products are built and the build folder is busy (CI
# runs the benchmark scripts beside the test build, which holds .build's lock): nothing is built,
# and a product that is missing is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
products=("$@"); [ ${#products[@]} -gt 0 ] || products=(evanesco)
if [ -n "${EVANESCO_RELEASE_BUILT:-}" ]; then
    for p in "${products[@]}"; do
        [ -x ".build/release/$p" ] || { echo "build-release: .build/release/$p is missing (EVANESCO_RELEASE_BUILT is set)" >&2; exit 1; }
    done
    exit 0
fi
for p in "${products[@]}"; do
    swift build -c release --static-swift-stdlib --product "$p"
done
