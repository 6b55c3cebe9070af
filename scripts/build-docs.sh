#!/usr/bin/env bash
# Builds the DocC documentation of every library module with swift-docc-plugin, warnings as
# errors (a broken symbol link or an undocumented topic fails the build), into .build/docs/.
#   scripts/build-docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=.build/docs
mkdir -p "$out"
for target in EvanescoCore EvanescoIO EvanescoAlign EvanescoStack EvanescoFaces EvanescoDepth EvanescoStudio EvanescoBatch; do
    if ! swift package --allow-writing-to-directory "$out" generate-documentation --target "$target" \
        --warnings-as-errors --output-path "$out/$target" > "$out/$target.log" 2>&1; then
        grep -v "^\[[0-9]" "$out/$target.log" >&2
        echo "build-docs: $target failed" >&2
        exit 1
    fi
done
echo "build-docs: documentation in $out"
