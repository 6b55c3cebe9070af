#!/usr/bin/env bash
# The test suite: builds the test bundle and the `evanesco` binary its CLI tests run (each by
# product, so nothing the tests do not use is compiled, such as the benchmarks), then runs it.
# Arguments go to `swift test` (--filter, --skip); --build-only stops after the build.
# EVANESCO_SANITIZE=address|thread builds this package's code under that sanitizer (Package.swift).
# EVANESCO_TEST_CONFIG=release builds in release configuration, this package's modules compiled for
# @testable imports and no dependency (Package.swift), so the build reuses every dependency that
# scripts/build-release.sh compiled (CI does this; the tool in .build/release is then the tests'
# build, no longer the static release one). Unset, the tests build in debug.
#   scripts/test.sh [--build-only | SWIFT-TEST-OPTION...]
set -euo pipefail
cd "$(dirname "$0")/.."
config=() testable=()
case ${EVANESCO_TEST_CONFIG:-debug} in
    debug) ;;
    release) config=(-c release) testable=(--disable-testable-imports) ;;
    *) echo "test.sh: EVANESCO_TEST_CONFIG is debug or release, not $EVANESCO_TEST_CONFIG" >&2; exit 64 ;;
esac
swift build "${config[@]}" --product EvanescoPackageTests
# ThreadSanitizer's test product holds the library's suites only: no CLI tests, no binary.
[ "${EVANESCO_SANITIZE:-}" = thread ] || swift build "${config[@]}" --product evanesco
[ "${1:-}" = --build-only ] && exit 0
exec swift test "${config[@]}" "${testable[@]}" --skip-build "$@"
