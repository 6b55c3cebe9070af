#!/usr/bin/env bash
# This package's code under AddressSanitizer (the whole suite, the studio's browser test
# included) and under ThreadSanitizer (the library's suites, whose code splits its work over
# threads through raw buffers: the strip executor and filters in Core, pyramids and local
# alignment in Align, the merge, erase and spill in Stack, the backdrop pipeline and lens blur in
# Depth, parallel batches and the queue worker in Batch; the studio's async server is left out
# for time, its data races ruled out at compile time by Swift 6's checking, which raw buffers
# escape). EVANESCO_SANITIZE (see Package.swift) instruments every target of this package and no
# dependency, so a sanitized build reuses the dependencies' plain debug build in .build and
# rebuilds only this package (about 4 minutes here; under thread the test product holds only the
# suites it runs, so less). Exits non-zero on any report. The queue's
# tests need PostgreSQL: run it under scripts/with-postgres.sh (as .ci/run does), or they say
# they were skipped.
#   scripts/sanitizers.sh [address|thread]...      (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
kinds=("$@"); [ ${#kinds[@]} -gt 0 ] || kinds=(address thread)
for kind in "${kinds[@]}"; do
    case $kind in
        address | thread) ;;
        *) echo "usage: scripts/sanitizers.sh [address|thread]..." >&2; exit 64 ;;
    esac
    log=.build/sanitizer-$kind.log
    mkdir -p .build
    start=$(date +%s)
    # halt_on_error: the first report fails the run; detect_leaks stays on for ASan. Foundation's
    # and XCTest's own leaks on Linux are suppressed (scripts/lsan.supp), ours are not.
    export EVANESCO_SANITIZE=$kind
    export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    # Under thread, Package.swift keeps only the concurrent suites' test targets.
    if scripts/test.sh >"$log" 2>&1; then
        echo "sanitizers: $kind clean ($(grep -oE 'Test run with [0-9]+ tests?' "$log" | awk '{n += $4} END {print n}') tests, $(( $(date +%s) - start )) s)"
    else
        grep -m 20 -E "ERROR: (Address|Thread)Sanitizer|WARNING: ThreadSanitizer|SUMMARY|✘" "$log" >&2 || tail -30 "$log" >&2
        echo "sanitizers: $kind FAILED (log: $log)" >&2
        exit 1
    fi
done
