#!/usr/bin/env bash
# Every burst of ../shared/data/bursts that ../shared/bench/anchor_stack.py can read (folders and
# lists of frames; it takes no video), side by side in one run: `evanesco stack` (default robust
# merge, align auto) and the anchor (AKAZE + sigma clip), alternated ROUNDS times, wall clock of the
# whole command. Prints a Markdown table: medians, their ratio, the frames each merged (the
# anchor's AKAZE at 1/4 scale cannot align every burst: on highway it aligns none and its output
# is the first frame, so the table also times it at full scale there, --align-scale 1, where it
# aligns them all), and for the synthetic bursts the quality of both (score.py image: PSNR dB /
# pEPs %). The video clips, which only evanesco reads, are timed alone at the end.
#   Benchmarks/stack-all-vs-anchor.sh [ROUNDS=3] [BURST ...]
# BURST names as in the table's first column (default: all of them; pug-handheld's anchor takes
# about 20 s a round).
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
rounds=${1:-3}; shift || true
b=$shared/data/bursts
# name | frames (a folder, or files separated by commas)
all=(
    "motorcycle-handheld|$b/synthetic/motorcycle-handheld/frames"
    "motorcycle-parallax|$b/synthetic/motorcycle-parallax/frames"
    "motorcycle-parallax-twin|$b/synthetic/motorcycle-parallax-twin/frames"
    "pug-handheld|$b/synthetic/pug-handheld/frames"
    "hdrplus-tree|$b/hdrplus-tree"
    "lowlight-handheld|$b/lowlight-handheld"
    "night-cars|$b/night-cars/in1.jpg,$b/night-cars/in2.jpg,$b/night-cars/in3.jpg"
    "vtest-pedestrians|$b/vtest-pedestrians/frames"
    "highway|$b/highway/frames"
    "highway, anchor at --align-scale 1|$b/highway/frames"
)
videos=("tree-hand|$b/tree-hand/tree.avi" "highway-video|$b/highway/video.avi" "vtest-video|$b/vtest-pedestrians/vtest.avi")
wanted=("$@")
pick() { [ ${#wanted[@]} -eq 0 ] && return 0; local w; for w in "${wanted[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }
bin=$(scripts/build-release.sh evanesco)/evanesco
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
echo "$(date -u +%FT%TZ), $(nproc) cores, $rounds alternated rounds, medians of the whole command (wall clock)"
echo
echo "| burst | frames | evanesco | anchor_stack.py | ratio | frames merged (evanesco / anchor) | evanesco PSNR / pEPs | anchor PSNR / pEPs |"
echo "|---|---|---|---|---|---|---|---|"
for entry in "${all[@]}"; do
    name=${entry%%|*}; IFS=, read -r -a inputs <<< "${entry#*|}"
    pick "$name" || pick "${name%%,*}" || continue
    [ -e "${inputs[0]}" ] || { echo "| $name | absent | | | | | | |"; continue; }
    extra=(); [[ "$name" == *"--align-scale 1"* ]] && extra=(--align-scale 1)
    ours=() anchor=()
    for r in $(seq "$rounds"); do
        s=$(date +%s.%N); "$bin" stack "${inputs[@]}" -o "$out/ours.png" --report "$out/ours.json" --force --quiet >/dev/null 2>&1
        ours+=("$(elapsed "$s")")
        s=$(date +%s.%N); python3 "$shared/bench/anchor_stack.py" "${inputs[@]}" --out "$out/anchor.png" --merge sigma "${extra[@]}" \
            --json "$out/anchor.json" >/dev/null 2>&1
        anchor+=("$(elapsed "$s")")
    done
    frames=$(python3 -c "import json; d=json.load(open('$out/ours.json')); print('%d x %dx%d' % (d['frames_used'], d['width'], d['height']))")
    merged=$(python3 -c "import json; o=json.load(open('$out/ours.json')); a=json.load(open('$out/anchor.json')); print('%d / %d' % (o['frames_used'], a['n_frames'] - len(a['frames_failed'])))")
    mo=$(median "${ours[@]}"); ma=$(median "${anchor[@]}")
    q_ours="" q_anchor=""
    if [ -f "$b/synthetic/$name/gt.png" ]; then
        score() { python3 "$shared/bench/score.py" image "$1" --burst "$b/synthetic/$name" 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('%.2f / %.4f' % (d['PSNR'], d['pEPs']))"; }
        q_ours=$(score "$out/ours.png"); q_anchor=$(score "$out/anchor.png")
    fi
    echo "| $name | $frames | $mo s | $ma s | $(ratio "$mo" "$ma") | $merged | $q_ours | $q_anchor |"
done
for entry in "${videos[@]}"; do
    name=${entry%%|*}; input=${entry#*|}
    pick "$name" || continue
    [ -e "$input" ] || continue
    ours=()
    for r in $(seq "$rounds"); do
        s=$(date +%s.%N); "$bin" stack "$input" -o "$out/ours.png" --report "$out/ours.json" --force --quiet >/dev/null 2>&1
        ours+=("$(elapsed "$s")")
    done
    frames=$(python3 -c "import json; d=json.load(open('$out/ours.json')); print('%d x %dx%d' % (d['frames_used'], d['width'], d['height']))")
    echo "| $name (video) | $frames | $(median "${ours[@]}") s | (reads no video) | | | | |"
done
