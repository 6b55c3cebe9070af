#!/usr/bin/env bash
# Shows that two builds write the same files, byte for byte: every shared burst stacked (the
# default merge, and median with local alignment where parallax calls for it), every shared depth
# photo through each effect, its depth extracted as a 16-bit PNG, and a backdrop from it. Used to
# check that a refactor changed no output. Each line says "same" or "DIFFERENT"; the exit status
# is 1 when any file differs, except files whose name matches --except (a change made on purpose,
# listed as "differs, as expected").
#   scripts/same-outputs.sh OLD_EVANESCO NEW_EVANESCO [--except GLOB]...
# e.g. scripts/same-outputs.sh /work/old/.build/release/evanesco .build/release/evanesco --except 'gdepth-*'
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/same-outputs.sh OLD_EVANESCO NEW_EVANESCO [--except GLOB]..." >&2; exit 64; }
[ $# -ge 2 ] || usage
old=$1 new=$2; shift 2
except=()
while [ $# -gt 0 ]; do
    case $1 in
        --except) [ $# -ge 2 ] || usage; except+=("$2"); shift 2 ;;
        *) usage ;;
    esac
done
for b in "$old" "$new"; do [ -x "$b" ] || { echo "same-outputs: $b is not an executable" >&2; exit 64; }; done
data=$(cd .. && pwd)/shared/data
[ -d "$data" ] || { echo "same-outputs: needs ../shared/data (the shared bursts and depth photos)" >&2; exit 2; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
mkdir -p "$out/old" "$out/new"

b=$data/bursts d=$data/depth
bursts=(
    "motorcycle-handheld|$b/synthetic/motorcycle-handheld/frames"
    "motorcycle-parallax|$b/synthetic/motorcycle-parallax/frames"
    "motorcycle-parallax-twin|$b/synthetic/motorcycle-parallax-twin/frames"
    "pug-handheld|$b/synthetic/pug-handheld/frames"
    "hdrplus-tree|$b/hdrplus-tree"
    "lowlight-handheld|$b/lowlight-handheld"
    "night-cars|$b/night-cars/in1.jpg $b/night-cars/in2.jpg $b/night-cars/in3.jpg"
    "vtest-pedestrians|$b/vtest-pedestrians/frames"
    "highway|$b/highway/frames"
    "tree-hand|$b/tree-hand/tree.avi"
)
photos=(
    "pug|$d/pug-iphone13pro/pug.heic"
    "truedepth-heic|$d/truedepth-iphone/heic_depth_data.heic"
    "truedepth-face|$d/truedepth-iphone/heic_face_data.heic"
    "truedepth-jpeg|$d/truedepth-iphone/jpeg_depth_data.jpg"
    "gdepth-lensblur|$d/gdepth-lensblur/lensblur_gdepth_compound.jpg"
)

# name command... (OUT in the command is replaced by each side's output file)
jobs=()
for entry in "${bursts[@]}"; do
    name=${entry%%|*}; inputs=${entry#*|}
    jobs+=("stack-$name.png|stack $inputs -o OUT --quiet")
    jobs+=("stack-$name-median-local.png|stack $inputs -o OUT --quiet --merge median --align local")
done
for entry in "${photos[@]}"; do
    name=${entry%%|*}; photo=${entry#*|}
    for effect in mask spotlight color blur lens; do
        jobs+=("$name-$effect.png|portrait $photo -o OUT --effect $effect --focus-point 0.5,0.45")
    done
    jobs+=("$name-depth.png|depth extract $photo -o OUT")
    jobs+=("$name-backdrop.png|backdrop --portrait $photo -o OUT")
done

different=0 same=0 expected=0
for job in "${jobs[@]}"; do
    file=${job%%|*}; command=${job#*|}
    for side in old new; do
        bin=$old; [ $side = new ] && bin=$new
        # shellcheck disable=SC2086  # the command is split into words on purpose
        if ! "$bin" ${command//OUT/$out/$side/$file} >"$out/$side/$file.log" 2>&1; then
            echo "same-outputs: $side build failed: evanesco ${command//OUT/$file}" >&2
            tail -5 "$out/$side/$file.log" >&2
            exit 1
        fi
    done
    if cmp -s "$out/old/$file" "$out/new/$file"; then
        same=$((same + 1)); echo "same       $file"
    else
        allowed=false
        for g in "${except[@]}"; do [[ $file == $g ]] && allowed=true; done
        if $allowed; then expected=$((expected + 1)); echo "differs, as expected  $file"
        else different=$((different + 1)); echo "DIFFERENT  $file  (evanesco ${command//OUT/$file})"; fi
    fi
done
echo "same-outputs: $same same, $expected different as expected, $different different (of ${#jobs[@]} files)"
[ $different -eq 0 ]
