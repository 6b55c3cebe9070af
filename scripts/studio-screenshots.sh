#!/usr/bin/env bash
# The README's studio screenshots: the browser test against the release binary, with the
# pedestrian burst, pug.heic and a TrueDepth selfie from ../shared/data, saving each workspace.
#   scripts/studio-screenshots.sh            (writes docs/images/studio-*.png)
set -euo pipefail
cd "$(dirname "$0")/.."
release=$(scripts/build-release.sh evanesco)
swift build --build-tests
EVANESCO_BIN="$release/evanesco" EVANESCO_SCREENSHOTS="$PWD/docs/images" \
    swift test --skip-build --filter StudioBrowser
