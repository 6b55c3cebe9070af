#!/usr/bin/env bash
# The erase brush on bursts it was never tuned on: a family made with ../shared/bench/make_burst.py
# (two lingering occluders that stand still for --linger-fraction of the frames, so that no
# per-pixel vote removes them, among six moving ones), each stacked plainly and with --erase over
# a mask painted roughly around the lingering ones (issue 50): each one's footprint (what every
# frame of its stay shows different from the clean scene, once warped back), holes filled,
# dilated by DILATION px. MASK=coverage takes issue 28's mask instead (every pixel an occluder of
# any kind covered in more than half the frames, dilated 8 px; DILATIONS is then ignored).
# Scores against gt.png (erase_family.py): PSNR over the whole picture, inside the mask and
# outside it, pEPs (% of pixels off by more than 20 grey levels) over the whole and inside the
# mask, the pixels beyond the mask's seam band (12 px) that differ from the plain merge at all
# (none may), and the erase pass's time against the whole command. And what the frames allow: their
# mean through the true homographies (Lanczos), against the plain merge, where no occluder ever passed.
#   Benchmarks/erase-family.sh [BASES="motorcycle aloe graffiti night"] [SEEDS="1 2 3"] [FRACTIONS="0.6"] [DILATIONS="8 16"]
# Prints one row per burst and mask, then the worst and the median of each column.
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
bases=${1:-motorcycle aloe graffiti night}; seeds=${2:-1 2 3}; fractions=${3:-0.6}; dilations=${4:-8 16}
kind=${MASK:-painted}
[ "$kind" = coverage ] && dilations=8
declare -A base_file=([motorcycle]=stereo/motorcycle/motorcycle_left.png [aloe]=stereo/aloe/aloeL.jpg
                      [graffiti]=registration/graffiti/graf1.png [night]=bursts/night-cars/in1.jpg)
bin=${EVANESCO:-$(scripts/build-release.sh evanesco)/evanesco}
require_plain_build "$bin"
helper=Benchmarks/erase_family.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows=$work/rows.jsonl
for base in $bases; do
    for seed in $seeds; do
        for fraction in $fractions; do
            b=$work/$base-$seed-$fraction
            python3 "$shared/bench/make_burst.py" --base "$shared/data/${base_file[$base]}" --out "$b" --frames 20 --seed "$seed" \
                --lingering 2 --linger-fraction "$fraction" --max-side 1600 --json /dev/null >/dev/null 2>&1
            "$bin" stack "$b/frames" -o "$b/plain.png" --quiet >/dev/null
            for dilation in $dilations; do
                python3 "$helper" mask "$b" --kind "$kind" --dilation "$dilation"
                s=$(date +%s.%N)
                "$bin" stack "$b/frames" -o "$b/erased.png" --erase "$b/mask.png" --report "$b/erased.json" --force \
                    --quiet >/dev/null
                t=$(elapsed "$s")
                python3 "$helper" score "$b" --name "$base-$seed-$fraction-$kind$dilation" --seconds "$t" \
                    --bench "$shared/bench" >>"$rows"
            done
        done
    done
done
python3 "$helper" summary "$rows"
