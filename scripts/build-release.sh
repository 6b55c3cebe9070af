#!/usr/bin/env bash
# The release build, in one place: every script and the README call this. The command-line tool
# and the benchmarks are linked with the Swift runtime and Foundation statically
# (EVANESCO_STATIC_RUNTIME, see Package.swift), so they start fast and run on a machine without
# the toolchain's libraries. Prints the directory that holds the products (build output goes to
# stderr), so a script says `release=$(scripts/build-release.sh evanesco)` and runs
# "$release/evanesco".
#   scripts/build-release.sh [PRODUCT...]      (default: evanesco)
# A library product is found as its file, lib<PRODUCT>.so (EvanescoC, the C interface).
# EVANESCO_RELEASE_DIR=DIR says the release products are built and are in DIR: nothing is built,
# and a product missing there is an error. CI sets it: its tests are built in release
# configuration too, sharing the dependencies, and their (sanitized) build replaces the tool in
# .build/release, so CI keeps the release products aside and runs its checks on those.
set -euo pipefail
cd "$(dirname "$0")/.."
products=("$@"); [ ${#products[@]} -gt 0 ] || products=(evanesco)
if [ -n "${EVANESCO_RELEASE_DIR:-}" ]; then
    dir=$(cd "$EVANESCO_RELEASE_DIR" && pwd)
    for p in "${products[@]}"; do
        [ -x "$dir/$p" ] || [ -f "$dir/lib$p.so" ] \
            || { echo "build-release: $dir/$p is missing (EVANESCO_RELEASE_DIR is set)" >&2; exit 1; }
    done
    echo "$dir"
    exit 0
fi
for p in "${products[@]}"; do
    EVANESCO_STATIC_RUNTIME=1 swift build -c release --product "$p" >&2
done
echo "$PWD/.build/release"
