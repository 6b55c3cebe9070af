"""Reading and writing images: round trips for every dtype and layout, and the refusals."""

from __future__ import annotations

import os

import numpy as np
import pytest

import evanesco
from conftest import scene


@pytest.mark.parametrize("dtype,ext", [(np.uint8, "png"), (np.uint16, "png"), (np.uint16, "tif"), (np.float32, "tif")])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_lossless_round_trip(tmp_path, dtype, ext, channels):
    rng = np.random.default_rng(channels)
    if dtype == np.float32:
        image = rng.random((37, 53, channels), dtype=np.float32) * 10 - 2
    else:
        image = rng.integers(0, np.iinfo(dtype).max, size=(37, 53, channels), endpoint=True).astype(dtype)
    if channels == 1:
        image = image[:, :, 0]
    path = tmp_path / f"x.{ext}"
    evanesco.write_image(path, image)
    back = evanesco.read_image(path)
    assert back.dtype == image.dtype and back.shape == image.shape
    assert np.array_equal(back, image)
    assert back.flags.c_contiguous and back.flags.writeable


def layouts(image: np.ndarray):
    """The same pixels in layouts numpy makes every day: a crop, a flip, Fortran order, a
    channel-first array moved to channel-last, a strided subsample."""
    big = np.zeros((image.shape[0] * 2, image.shape[1] * 2, image.shape[2]), image.dtype)
    big[::2, ::2] = image
    yield "crop", np.pad(image, ((3, 3), (5, 5), (0, 0)))[3:-3, 5:-5]
    yield "flipped twice", image[::-1, ::-1][::-1, ::-1]
    yield "reversed rows", image[::-1].copy()[::-1]
    yield "fortran", np.asfortranarray(image)
    yield "channel first", np.ascontiguousarray(image.transpose(2, 0, 1)).transpose(1, 2, 0)
    yield "every other", big[::2, ::2]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_any_layout_reads_as_contiguous(tmp_path, dtype):
    image = (scene(64, 48).astype(np.float32) * (257 if dtype == np.uint16 else 1)).astype(dtype)
    reference = tmp_path / "reference.tif"
    evanesco.write_image(reference, image)
    expected = open(reference, "rb").read()
    for name, view in layouts(image):
        path = tmp_path / f"{name}.tif"
        evanesco.write_image(path, view)
        assert open(path, "rb").read() == expected, name


def test_negative_strides_are_read_as_they_look(tmp_path):
    image = scene(40, 30)
    flipped = image[::-1, :, ::-1]  # rows upside down and BGR: negative row and channel strides
    evanesco.write_image(tmp_path / "f.png", flipped)
    assert np.array_equal(evanesco.read_image(tmp_path / "f.png"), np.ascontiguousarray(flipped))


def test_an_existing_file_is_kept_unless_overwrite(tmp_path):
    path = tmp_path / "x.png"
    first, second = scene(32, 24), scene(32, 24, seed=3)
    evanesco.write_image(path, first)
    with pytest.raises(evanesco.FileError, match="already exists"):
        evanesco.write_image(path, second)
    assert np.array_equal(evanesco.read_image(path), first)
    evanesco.write_image(path, second, overwrite=True)
    assert np.array_equal(evanesco.read_image(path), second)


def test_jpeg_quality_is_a_checked_setting(tmp_path):
    image = scene(64, 48)
    evanesco.write_image(tmp_path / "q20.jpg", image, quality=20)
    evanesco.write_image(tmp_path / "q95.jpg", image, quality=95)
    assert os.path.getsize(tmp_path / "q20.jpg") < os.path.getsize(tmp_path / "q95.jpg")
    with pytest.raises(evanesco.SettingError, match="quality must be within 1...100"):
        evanesco.write_image(tmp_path / "bad.jpg", image, quality=0)
    with pytest.raises(evanesco.SettingError, match="bit_depth"):
        evanesco.write_image(tmp_path / "bad.png", image, bit_depth=12)
    assert not (tmp_path / "bad.jpg").exists() and not (tmp_path / "bad.png").exists()


def test_bad_arrays_raise_argument_errors(tmp_path):
    with pytest.raises(evanesco.ArgumentError, match="dtype float64 is not one of uint8, uint16, float32"):
        evanesco.write_image(tmp_path / "x.tif", np.zeros((4, 4)))
    with pytest.raises(evanesco.ArgumentError, match=r"shape \(height, width\)"):
        evanesco.write_image(tmp_path / "x.png", np.zeros((2, 4, 4, 3), np.uint8))
    with pytest.raises(evanesco.ArgumentError, match="1, 3 or 4 channels"):
        evanesco.write_image(tmp_path / "x.png", np.zeros((4, 4, 7), np.uint8))
    with pytest.raises(evanesco.ArgumentError, match="empty"):
        evanesco.write_image(tmp_path / "x.png", np.zeros((0, 4, 3), np.uint8))
    assert list(tmp_path.iterdir()) == []


def test_bad_files_raise_file_errors(tmp_path):
    with pytest.raises(evanesco.FileError, match="no such file"):
        evanesco.read_image(tmp_path / "missing.png")
    damaged = tmp_path / "damaged.png"
    damaged.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    with pytest.raises(evanesco.Error) as caught:
        evanesco.read_image(damaged)
    assert "damaged.png" in str(caught.value)
    assert isinstance(caught.value, (evanesco.FileError, evanesco.InputError))
