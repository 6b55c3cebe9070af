# Helpers shared by the side-by-side benchmark scripts (sourced, not run).
shared=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../shared" && pwd)
# Seconds since a `date +%s.%N` stamp.
elapsed() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))" "$1" "$(date +%s.%N)"; }
# Median of the arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# Ratio a / b to 3 decimals.
ratio() { python3 -c "import sys; print(round(float(sys.argv[1]) / float(sys.argv[2]), 3))" "$1" "$2"; }
