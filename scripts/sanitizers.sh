#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and under ThreadSanitizer, each in its own build
# folder (the CLI tests then run the sanitized binary too). Exits non-zero on any report.
#   scripts/sanitizers.sh [address|thread]...      (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
kinds=("$@"); [ ${#kinds[@]} -gt 0 ] || kinds=(address thread)
for kind in "${kinds[@]}"; do
    log=.build-$kind.log
    # Under ThreadSanitizer the CLI tests are skipped for time: they spawn the binary, whose
    # threaded code is the library's, which the library tests exercise directly.
    # The browser test runs on its own after the suite (as in .ci/run against the release
    # binary): inside the parallel suite its page waits compete with every other test.
    skip=(--skip StudioBrowser); [ "$kind" = thread ] && skip=(--skip EvanescoCLITests)
    start=$(date +%s)
    # halt_on_error: the first report fails the run; detect_leaks stays on for ASan.
    # Foundation's and XCTest's own leaks on Linux are suppressed (scripts/lsan.supp), ours are not.
    # Exported: both runs below (the suite, then the browser test) need them.
    export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    if swift test --sanitize="$kind" --build-path ".build-$kind" "${skip[@]}" >"$log" 2>&1 &&
       { [ "$kind" = thread ] || swift test --sanitize="$kind" --build-path ".build-$kind" --skip-build --filter StudioBrowser >>"$log" 2>&1; }; then
        echo "sanitizers: $kind clean ($(grep -oE 'Test run with [0-9]+ tests?' "$log" | awk '{n += $4} END {print n}') tests, $(( $(date +%s) - start )) s)"
    else
        grep -m 20 -E "ERROR: (Address|Thread)Sanitizer|WARNING: ThreadSanitizer|SUMMARY|✘" "$log" >&2 || tail -30 "$log" >&2
        echo "sanitizers: $kind FAILED (log: $log)" >&2
        exit 1
    fi
done
