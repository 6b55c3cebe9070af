# Helpers shared by the side-by-side benchmark scripts (sourced, not run).
shared=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../shared" && pwd)
# Seconds since a `date +%s.%N` stamp.
elapsed() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))" "$1" "$(date +%s.%N)"; }
# Median of the arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# Ratio a / b to 3 decimals.
ratio() { python3 -c "import sys; print(round(float(sys.argv[1]) / float(sys.argv[2]), 3))" "$1" "$2"; }
# Refuses a tool built with a sanitizer: a release-configuration test build (EVANESCO_SANITIZE)
# leaves an instrumented evanesco in .build/release, 2-3 times slower, whose times are not the
# product's. scripts/build-release.sh builds the real one. (grep reads all of nm's output, so the
# pipeline's status is grep's, with or without pipefail.)
require_plain_build() {
    [ -x "$1" ] || { echo "$1: no such tool; run scripts/build-release.sh first" >&2; exit 2; }
    if nm "$1" 2>/dev/null | grep -E '^[0-9a-f]+ [TtWw] __(asan|tsan|msan)_init$' >/dev/null; then
        echo "$1 is built with a sanitizer (a test build left it); run scripts/build-release.sh first" >&2
        exit 2
    fi
}
