#!/usr/bin/env bash
# The Python package's suite, on the package as a user gets it: builds the wheel with `pip wheel
# ./python` (which builds the C library through scripts/build-release.sh, or takes it from
# EVANESCO_RELEASE_DIR), installs it into a fresh virtual environment with numpy and pytest, and
# runs python/tests there with the Swift toolchain's directories removed from PATH and
# LD_LIBRARY_PATH: the wheel must need none of them. The tests compare with the command line of
# the same build (EVANESCO_CLI).
#   scripts/python-tests.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/.build/python
rm -rf "$work" python/build python/evanesco.egg-info
mkdir -p "$work"
release=$(scripts/build-release.sh evanesco EvanescoC)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check numpy pytest
"$work/venv/bin/pip" wheel -q --disable-pip-version-check --no-deps ./python -w "$work/dist"
rm -rf python/build python/evanesco.egg-info
"$work/venv/bin/pip" install -q --disable-pip-version-check "$work"/dist/evanesco-*.whl
library=$("$work/venv/bin/python" -c 'import pathlib, sysconfig; print(pathlib.Path(sysconfig.get_paths()["platlib"]) / "evanesco" / "libEvanescoC.so")')
if ldd "$library" | grep -i swift; then
    echo "python-tests: the wheel's library needs the Swift toolchain's libraries (above)" >&2
    exit 1
fi
echo "python-tests: wheel $(basename "$work"/dist/evanesco-*.whl), $(du -m "$work"/dist/evanesco-*.whl | cut -f1) MB" >&2
bare_path=$(echo "$PATH" | tr ':' '\n' | grep -v -i swift | paste -sd: -)
# A C program on the header and the wheel's library alone (gcc checks every call against the
# prototypes; the program checks results, statuses and messages).
gcc -std=c11 -Wall -Wextra -Werror -I Sources/CEvanesco/include python/tests/c/smoke.c \
    -L"$(dirname "$library")" -lEvanescoC -Wl,-rpath,"$(dirname "$library")" -o "$work/smoke"
env -u LD_LIBRARY_PATH PATH="$bare_path" "$work/smoke" "$work" >&2
cd "$work"  # not the source tree: the installed package is what is imported
env -u LD_LIBRARY_PATH -u EVANESCO_LIBRARY PATH="$bare_path" EVANESCO_CLI="$release/evanesco" \
    "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests" "$@"
# The overhead benchmark once, small: a renamed report key fails here, not in a chart.
env -u LD_LIBRARY_PATH -u EVANESCO_LIBRARY PATH="$bare_path" \
    "$work/venv/bin/python" "$root/Benchmarks/python-overhead.py" --repeat 1 --scale 0.1 > /dev/null
