#!/usr/bin/env bash
# timothybrooks/hdr-plus (MIT, C++/Halide) built beside ours against Debian's Halide 14 and
# LibRaw, and timed on a make_raw_burst.py burst side by side with `evanesco stack` (the whole
# command each: read, align, merge; theirs also finishes to PNG, ours writes a DNG).
#
#   Benchmarks/hdrplus-halide.sh SRC BURST_DIR [ROUNDS]
#
# SRC is a checkout of github.com/timothybrooks/hdr-plus (tested at ef4dd2c); nothing of it is
# kept in this repository. It needs libhalide14-0-dev, libraw-dev, libpng-dev, libtiff-dev, cmake.
# Two changes make it build with Halide 14, applied to a copy under .build/hdrplus-src:
#   * Debian's Halide 14 CMake package loads LLVM's, which runs C checks, and the project
#     enables C++ only: C is enabled through CMAKE_PROJECT_HDR_PLUS_INCLUDE;
#   * src/util.cpp calls Func::types(), which Halide 14 names output_types().
# The AOT target is named (HDRPLUS_HALIDE_TARGET, default AVX-512 as on Skylake servers) rather
# than "host": on this AMD EPYC, Halide 14 takes the host for a Sapphire Rapids and its pipeline
# dies on an AVX512-FP16 instruction (vmovw) the CPU lacks.
set -euo pipefail
src=${1:?usage: hdrplus-halide.sh SRC BURST_DIR [ROUNDS]}
burst=${2:?usage: hdrplus-halide.sh SRC BURST_DIR [ROUNDS]}
rounds=${3:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/Benchmarks/lib.sh"
require_plain_build "$here/.build/release/evanesco"
work=$here/.build/hdrplus-src
target=${HDRPLUS_HALIDE_TARGET:-x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake}
if [ ! -x "$work/build/hdrplus" ]; then
    command -v cmake >/dev/null && [ -d /usr/lib/x86_64-linux-gnu/cmake/Halide14 ] || {
        echo "hdrplus-halide: needs cmake and Debian's Halide 14: apt-get install cmake libhalide14-0-dev" >&2
        exit 2
    }
    rm -rf "$work"
    mkdir -p "$work"
    if [ -d "$src/.git" ] || [ -f "$src/CMakeLists.txt" ]; then
        cp -r "$src/." "$work/"
    else
        git --git-dir="$src" archive HEAD | tar -x -C "$work"
    fi
    sed -i 's/input\.types()\[0\]/input.output_types()[0]/' "$work/src/util.cpp"
    echo 'enable_language(C)' > "$work/enable-c.cmake"
    cmake -S "$work" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DHalide_TARGET="$target" \
        -DCMAKE_PROJECT_HDR_PLUS_INCLUDE="$work/enable-c.cmake" > "$work/cmake.log"
    make -C "$work/build" -j2 hdrplus > "$work/make.log"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/in" "$tmp/out"
cp "$burst"/frames/*.dng "$tmp/in/"
names=$(cd "$tmp/in" && ls *.dng)
ours=()
theirs=()
for _ in $(seq "$rounds"); do
    s=$(date +%s.%N)
    (cd "$tmp/out" && "$work/build/hdrplus" "$tmp/in/" halide.png $names > /dev/null)
    theirs+=("$(elapsed "$s")")
    s=$(date +%s.%N)
    "$here/.build/release/evanesco" stack "$tmp"/in/*.dng -o "$tmp/out/ours.dng" --force --quiet > /dev/null
    ours+=("$(elapsed "$s")")
done
mo=$(median "${ours[@]}")
mt=$(median "${theirs[@]}")
echo "hdr-plus (Halide 14) median ${mt} s; evanesco stack median ${mo} s; ratio $(ratio "$mo" "$mt")"
