#!/usr/bin/env bash
# Builds the DocC documentation of every library module with swift-docc-plugin, warnings as
# errors (a broken symbol link or an undocumented topic fails the build), into
# .build/docs/MODULE.doccarchive: one invocation for all of them, so the package is planned and
# built once, not once per module. With EVANESCO_TEST_CONFIG=release (as CI runs it, after its
# release-configuration test builds) the symbol graphs come from the release build, reusing it.
#   scripts/build-docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=.build/docs
rm -rf "$out"
mkdir -p "$out"
config=(); [ "${EVANESCO_TEST_CONFIG:-}" = release ] && config=(-c release)
targets=()
for t in EvanescoCore EvanescoIO EvanescoAlign EvanescoStack EvanescoFaces EvanescoDepth EvanescoStudio EvanescoBatch; do
    targets+=(--target "$t")
done
if ! swift package "${config[@]}" --allow-writing-to-directory "$out" generate-documentation "${targets[@]}" \
    --warnings-as-errors --output-path "$out" > "$out/build.log" 2>&1; then
    grep -v -e "^\[[0-9]" -e "^warning: '.*': found 1 file(s) which are unhandled" -e "^    /.*CMakeLists.txt" \
        "$out/build.log" >&2
    echo "build-docs: FAILED (log: $out/build.log)" >&2
    exit 1
fi
echo "build-docs: documentation in $out ($(ls -d "$out"/*.doccarchive | wc -l) modules)"
