"""Camera raw bursts through Python: DNG frames made by ../shared/bench/make_raw_burst.py (from a
real photo), stacked to the finished picture the command line writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import evanesco
from conftest import run_cli

SHARED = Path(os.environ.get("EVANESCO_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
MAKER = SHARED.parent / "bench" / "make_raw_burst.py"
BASE = SHARED / "stereo" / "aloe" / "aloeL.jpg"


@pytest.fixture(scope="module")
def raw_burst(tmp_path_factory):
    if not MAKER.is_file() or not BASE.is_file():
        pytest.skip(f"{MAKER} or {BASE} is absent (../shared): the raw burst was not made")
    out = tmp_path_factory.mktemp("raw") / "burst"
    # The bench's own Python (OpenCV, tifffile: ../shared/bench/setup.sh), not this venv's.
    python = os.environ.get("EVANESCO_BENCH_PYTHON", "python3")
    made = subprocess.run([python, str(MAKER), "--base", str(BASE), "--out", str(out), "--frames", "4",
                           "--max-side", "480", "--seed", "3", "--json", os.devnull], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"make_raw_burst.py failed (is ../shared/bench/setup.sh run?): {made.stderr[-300:]}")
    return sorted(str(p) for p in (out / "frames").glob("*.dng")) or sorted(str(p) for p in out.glob("*.dng"))


def test_a_raw_burst_comes_back_finished_as_the_command_line_writes_it(tmp_path, raw_burst, cli):
    assert len(raw_burst) == 4, raw_burst
    run_cli(cli, "stack", *raw_burst, "-o", str(tmp_path / "cli.tif"))
    picture, report = evanesco.stack(raw_burst)
    assert picture.dtype == np.uint16 and picture.ndim == 3 and picture.shape[2] == 3
    assert np.array_equal(picture, evanesco.read_image(tmp_path / "cli.tif"))
    assert report["raw"] and report["frames_used"] == 4
