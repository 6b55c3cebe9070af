"""Stacking through Python: the command line's bytes, arrays and paths alike, progress and
cancellation, the GIL released, no leak across the C interface, and the refusals."""

from __future__ import annotations

import resource
import threading
import time

import numpy as np
import pytest

import evanesco
from conftest import burst, run_cli, write_frames


def test_moving_square_vanishes():
    clean, frames = burst()
    merged, report = evanesco.stack(frames, align="none")
    assert merged.dtype == np.uint8 and merged.shape == clean.shape
    assert np.abs(merged.astype(int) - clean).max() <= 1
    assert report["frames_used"] == len(frames) and report["merge"] == "robust"
    # The interface's own account: one copy of each frame in, of the result out.
    times = report["interface_s"]
    assert times["copy_in"] > 0 and times["work"] > times["copy_out"] > 0


def test_same_bytes_as_the_command_line(tmp_path, cli):
    clean, frames = burst()
    paths = write_frames(tmp_path, frames)
    run_cli(cli, "stack", *paths, "-o", str(tmp_path / "cli.png"), "--merge", "median")
    merged, report = evanesco.stack(paths, merge="median")
    evanesco.write_image(tmp_path / "py.png", merged)
    assert (tmp_path / "py.png").read_bytes() == (tmp_path / "cli.png").read_bytes()
    # The frames as arrays give the same image as their files.
    from_arrays, _ = evanesco.stack([evanesco.read_image(p) for p in paths], merge="median")
    assert np.array_equal(from_arrays, merged)
    assert report["inputs"] == paths


def test_inputs_are_not_modified(tmp_path):
    _, frames = burst()
    copies = [f.copy() for f in frames]
    evanesco.stack(frames)
    assert all(np.array_equal(a, b) for a, b in zip(frames, copies))


def test_settings_are_the_library_declarations():
    declared = {s["key"]: s for s in evanesco.settings("stack")}
    import inspect

    parameters = inspect.signature(evanesco.stack).parameters
    assert parameters["kappa"].default == declared["kappa"]["default"]
    assert parameters["winsor_fraction"].default == declared["winsorFraction"]["default"]
    assert parameters["merge"].default == declared["merge"]["default"]
    assert set(declared["merge"]["choices"]) >= {"robust", "median", "mean"}
    assert "winsor_fraction" in evanesco.stack.__doc__


def test_bad_settings_name_the_keyword():
    _, frames = burst(3)
    with pytest.raises(evanesco.SettingError, match='unknown setting "kapa" \\(did you mean "kappa"\\?\\)'):
        evanesco.stack(frames, kapa=3)
    with pytest.raises(evanesco.SettingError, match=r"winsor_fraction must be within \[0, 0.5\)"):
        evanesco.stack(frames, winsor_fraction=0.7)
    with pytest.raises(evanesco.SettingError, match="merge"):
        evanesco.stack(frames, merge="average")
    with pytest.raises(evanesco.SettingError, match="kappa"):
        evanesco.stack(frames, kappa=float("nan"))


def test_bad_inputs():
    clean, frames = burst(3)
    with pytest.raises(evanesco.InputError, match="all frames of a burst must have the same size"):
        evanesco.stack([frames[0], frames[1][:100]])
    with pytest.raises(evanesco.ArgumentError, match="frames is empty"):
        evanesco.stack([])
    with pytest.raises(evanesco.ArgumentError, match="mixes arrays and paths"):
        evanesco.stack([frames[0], "x.png"])
    with pytest.raises(evanesco.ArgumentError, match=r"frames\[1\]: dtype int64"):
        evanesco.stack([frames[0], frames[1].astype(np.int64)])
    with pytest.raises(evanesco.FileError, match="missing.png"):
        evanesco.stack(["missing.png", "missing2.png"])


def test_progress_is_reported_and_a_raise_cancels(tmp_path):
    _, frames = burst(6)
    seen = []
    evanesco.stack(frames, progress=lambda stage, done, total: seen.append((stage, done, total)))
    stages = [s for s, _, _ in seen]
    assert "align" in stages and "merge" in stages
    merge = [(d, t) for s, d, t in seen if s == "merge"]
    assert merge[-1][0] == merge[-1][1]  # the last merge report is the whole image

    class Stop(Exception):
        pass

    calls = []

    def stop(stage, done, total):
        calls.append(stage)
        if stage == "merge":
            raise Stop("enough")

    with pytest.raises(evanesco.Cancelled, match="Stop") as caught:
        evanesco.stack(frames, progress=stop)
    assert isinstance(caught.value.__cause__, Stop)
    # The work stopped soon after: far fewer merge reports than a whole run gives.
    assert calls.count("merge") < len(merge)
    # And the library is usable at once.
    merged, _ = evanesco.stack(frames)
    assert merged.shape == frames[0].shape


def big_burst(count=10):
    rng = np.random.default_rng(3)
    base = rng.integers(0, 255, size=(960, 1280, 3), dtype=np.uint8)
    return [np.roll(base, (i % 3, i % 2), axis=(0, 1)) for i in range(count)]


def count_while(busy) -> tuple[int, float]:
    """Counts in slices of 10 ms while `busy()` holds; returns the count and the seconds."""
    n, start = 0, time.perf_counter()
    while busy():
        end = time.perf_counter() + 0.01
        while time.perf_counter() < end:
            n += 1
    return n, time.perf_counter() - start


def test_other_threads_run_while_a_stack_works(capsys):
    frames = big_burst()
    start = time.perf_counter()
    evanesco.stack(frames)
    alone = time.perf_counter() - start
    stop = time.perf_counter() + 1.0
    base, base_seconds = count_while(lambda: time.perf_counter() < stop)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (evanesco.stack(frames), done.set()))
    worker.start()
    counted, seconds = count_while(lambda: not done.is_set())
    worker.join()
    share = (counted / seconds) / (base / base_seconds)
    with capsys.disabled():
        print(f"\n  GIL: while a stack of {alone:.2f} s alone ran ({seconds:.2f} s beside the counter), another "
              f"Python thread counted at {share:.0%} of its rate alone")
    # The stack keeps both cores busy, so the counter shares one core with it: about half its rate.
    # Were the GIL held during the call, the counter would stop until the call returned (~0 %).
    assert share > 0.25
    assert seconds < 3 * alone + 1


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def test_no_memory_is_kept_across_calls(capsys):
    _, frames = burst()
    for _ in range(10):
        merged, _ = evanesco.stack(frames)
    del merged
    baseline = resident_mb()
    for _ in range(100):
        merged, report = evanesco.stack(frames)
        try:
            evanesco.stack(frames, kappa=-1)
        except evanesco.SettingError:
            pass
    del merged, report
    grown = resident_mb() - baseline
    with capsys.disabled():
        print(f"\n  memory: {grown:+.1f} MB resident after 100 stacks of 5 x {frames[0].nbytes / 1e3:.0f} kB "
              "and 100 refusals")
    # Each result is 83 kB and each report a few kB: 100 leaked calls would hold more than 8 MB.
    assert grown < 4
