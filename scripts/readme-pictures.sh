#!/usr/bin/env bash
# Makes the README's before/after pictures (docs/images/) with the release binary, from sample
# images in Debian's opencv-doc package (Apache-2.0/BSD-3; fetched once into the demo's cache):
#   stacking:   20 frames of vtest.avi (pedestrians), `evanesco demo`
#   depth:      aloeL.jpg with its stereo ground-truth disparity aloeGT.png, focal blur on the pot
#   background: the same pair, cut behind the nearest region, over starry_night.jpg
#   lens blur:  the aloe pair, the tutorial's focal blur against --effect lens; and, when
#               ../shared/data is beside the checkout, pug.heic (pillow_heif's test photo, BSD-3)
#               with both effects, downscaled
#   scripts/readme-pictures.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/build-release.sh evanesco)/evanesco
cache=${XDG_CACHE_HOME:-$HOME/.cache}/evanesco
data=$cache/opencv-doc
if [ ! -f "$data/aloeGT.png" ]; then
    mkdir -p "$cache"; work=$(mktemp -d "$cache/download-XXXXXX"); trap 'rm -rf "$work"' EXIT
    (cd "$work" && { apt-get download opencv-doc >/dev/null 2>&1 || { apt-get update -qq && apt-get download opencv-doc >/dev/null; }; })
    mkdir -p "$work/x" && dpkg-deb -x "$work"/opencv-doc_*.deb "$work/x"
    mkdir -p "$data" && cp "$work/x/usr/share/doc/opencv-doc/examples/data/"{aloeL.jpg,aloeGT.png,starry_night.jpg,vtest.avi} "$data/"
fi
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$bin" demo --video "$data/vtest.avi" --out "$out/demo" >/dev/null
"$bin" portrait "$data/aloeL.jpg" --depth-map "$data/aloeGT.png" -o "$out/blur.jpg" --effect blur --focus-point 0.68,0.8 --radius 20
"$bin" backdrop --color "$data/aloeL.jpg" --depth "$data/aloeGT.png" --depth-format disparity8:0,2.55 --subject nearest \
    --background "$data/starry_night.jpg" -o "$out/backdrop.jpg"
ffmpeg -loglevel error -y -i "$out/demo/before-after.jpg" -vf scale=800:-2 -frames:v 1 -q:v 3 docs/images/stack.jpg
pair() {  # before after output
    ffmpeg -loglevel error -y -i "$1" -i "$2" -filter_complex "[0]scale=400:-2[a];[1]scale=400:-2[b];[a][b]hstack" -frames:v 1 -q:v 3 "$3"
}
pair "$data/aloeL.jpg" "$out/blur.jpg" docs/images/portrait-blur.jpg
pair "$data/aloeL.jpg" "$out/backdrop.jpg" docs/images/backdrop.jpg
"$bin" portrait "$data/aloeL.jpg" --depth-map "$data/aloeGT.png" -o "$out/lens.jpg" --effect lens --focus-point 0.68,0.8 --aperture 100 --blades 6
pair "$out/blur.jpg" "$out/lens.jpg" docs/images/aloe-blur-lens.jpg
made="stack.jpg, portrait-blur.jpg, backdrop.jpg, aloe-blur-lens.jpg"
pug=$(cd "$(dirname "$0")/../.." && pwd)/shared/data/depth/pug-iphone13pro/pug.heic
if [ -f "$pug" ]; then
    "$bin" portrait "$pug" -o "$out/pug-blur.jpg" --effect blur --focus-point 0.5,0.5
    "$bin" portrait "$pug" -o "$out/pug-lens.jpg" --effect lens --focus-point 0.5,0.5
    pair "$out/pug-blur.jpg" "$out/pug-lens.jpg" docs/images/pug-blur-lens.jpg
    # 1:1 crops at the subject's edge, where the two differ most.
    ffmpeg -loglevel error -y -i "$out/pug-blur.jpg" -i "$out/pug-lens.jpg" -filter_complex \
        "[0]crop=800:600:2150:1650[a];[1]crop=800:600:2150:1650[b];[a][b]hstack,scale=800:-2" -frames:v 1 -q:v 3 docs/images/pug-blur-lens-crop.jpg
    made="$made, pug-blur-lens.jpg, pug-blur-lens-crop.jpg"
else
    echo "readme-pictures: ../shared/data is absent; the pug pictures were not made" >&2
fi
echo "readme-pictures: docs/images/: $made"
