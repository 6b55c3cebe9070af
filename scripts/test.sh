#!/usr/bin/env bash
# The test suite: builds the test bundle and the `evanesco` binary its CLI tests run (each by
# product, so nothing the tests do not use is compiled, such as the benchmarks), then runs it.
# Arguments go to `swift test` (--filter, --skip); --build-only stops after the build.
# EVANESCO_SANITIZE=address|thread builds this package's code under that sanitizer (Package.swift).
#   scripts/test.sh [--build-only | SWIFT-TEST-OPTION...]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product EvanescoPackageTests
# ThreadSanitizer's test product holds the library's suites only: no CLI tests, no binary.
[ "${EVANESCO_SANITIZE:-}" = thread ] || swift build --product evanesco
[ "${1:-}" = --build-only ] && exit 0
exec swift test --skip-build "$@"
