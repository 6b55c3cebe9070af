#!/usr/bin/env bash
# Two builds of Evanesco side by side, alternated in one run: whole-command wall clock of
# `evanesco stack` (pug-handheld, motorcycle-handheld), `evanesco portrait --effect blur` (pug.heic)
# and the backdrop per-frame pipeline (EvanescoBenchmarks backdrop). Used to check that a change
# (dropping -Ounchecked, a refactor) costs no speed. Each DIR holds `evanesco` and `EvanescoBenchmarks`.
#   Benchmarks/build-vs-build.sh OLD_DIR NEW_DIR [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
old=${1:?usage: build-vs-build.sh OLD_DIR NEW_DIR [ROUNDS]}; new=${2:?usage}; rounds=${3:-5}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
bursts=$shared/data/bursts/synthetic
pug=$shared/data/depth/pug-iphone13pro/pug.heic
[ -d "$bursts" ] && [ -f "$pug" ] || { echo "build-vs-build: needs ../shared/data (bursts/synthetic, depth/pug-iphone13pro)" >&2; exit 2; }

declare -A times
run() {  # label dir command...
    local label=$1 dir=$2; shift 2
    local s; s=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || { echo "build-vs-build: $label failed in $dir" >&2; exit 1; }
    times[$label]+="$(elapsed "$s") "
}
for r in $(seq "$rounds"); do
    for side in old new; do
        dir=${!side}
        run "stack pug-handheld/$side" "$dir" "$dir/evanesco" stack "$bursts/pug-handheld/frames" -o "$out/$side-pug.png" --force --quiet
        run "stack motorcycle-handheld/$side" "$dir" "$dir/evanesco" stack "$bursts/motorcycle-handheld/frames" -o "$out/$side-moto.png" --force --quiet
        run "portrait blur pug.heic/$side" "$dir" "$dir/evanesco" portrait "$pug" -o "$out/$side-blur.jpg" --effect blur --focus 0.5 --force
        "$dir/EvanescoBenchmarks" backdrop --shared "$shared" > "$out/$side-backdrop-$r.txt"
    done
done
printf '%-34s %12s %12s %8s\n' "what ($rounds alternated rounds)" "old median" "new median" "new/old"
for what in "stack pug-handheld" "stack motorcycle-handheld" "portrait blur pug.heic"; do
    # shellcheck disable=SC2086
    mo=$(median ${times["$what/old"]}); mn=$(median ${times["$what/new"]})
    printf '%-34s %10.3f s %10.3f s %8.3f\n' "$what" "$mo" "$mn" "$(ratio "$mn" "$mo")"
done
python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
res = {"old": {}, "new": {}}
for side in res:
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{side}-backdrop-{r}.txt"):
            m = re.match(r"backdrop (\d+x\d+) \(depth (\d+x\d+)\): ([\d.]+) ms/frame", line)
            if m: res[side].setdefault(f"backdrop {m[1]}", []).append(float(m[3]))
for key in res["old"]:
    o, n = statistics.median(res["old"][key]), statistics.median(res["new"][key])
    print(f"{key:34s} {o:9.3f} ms {n:9.3f} ms {n/o:8.3f}")
PY
