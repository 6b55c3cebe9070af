#!/usr/bin/env bash
# Runs the whole test suite N times in a row beside a private PostgreSQL (scripts/with-postgres.sh),
# each run's log kept, and says how many passed: a test that fails one run in ten is a bug. Run it
# with the machine busy (another build beside it) to shake out timing assumptions.
#   scripts/soak.sh [N=10] [LOG-FOLDER=.build/soak]
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-10} logs=${2:-.build/soak}
mkdir -p "$logs"
scripts/test.sh --build-only > "$logs/build.log" 2>&1 || { tail -20 "$logs/build.log" >&2; exit 1; }
passed=0
for i in $(seq 1 "$n"); do
    start=$(date +%s)
    if scripts/with-postgres.sh scripts/test.sh > "$logs/run$i.log" 2>&1; then
        passed=$((passed + 1)); verdict=passed
    else
        verdict="FAILED: $(grep -m3 'recorded an issue' "$logs/run$i.log" | cut -c1-200 | tr '\n' ' ')"
    fi
    echo "soak: run $i of $n $verdict in $(( $(date +%s) - start )) s" >&2
done
echo "soak: $passed passed, $((n - passed)) failed"
[ "$passed" = "$n" ]
