"""Depth photos through Python: read_depth on a GDepth photo the test makes, portrait effects
with the command line's bytes, and a background replacement session with a known answer."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import numpy as np
import pytest

import evanesco
from conftest import run_cli, scene

NEAR, FAR = 0.5, 4.5


def depth_plane(width=96, height=72) -> np.ndarray:
    """8-bit GDepth samples: a near square (40) on a far ramp (120...250)."""
    x = np.arange(width)
    plane = np.tile(120 + 130 * x // (width - 1), (height, 1)).astype(np.uint8)
    plane[20:50, 30:66] = 40
    return plane


def gdepth_jpeg(tmp_path, photo: np.ndarray, plane: np.ndarray):
    """A GDepth JPEG (RangeLinear): the photo with the plane as a base64 PNG in its XMP."""
    evanesco.write_image(tmp_path / "primary.jpg", photo, quality=95)
    evanesco.write_image(tmp_path / "plane.png", plane)
    jpeg = (tmp_path / "primary.jpg").read_bytes()
    data = base64.b64encode((tmp_path / "plane.png").read_bytes()).decode()
    xmp = (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        '<rdf:Description rdf:about="" xmlns:GDepth="http://ns.google.com/photos/1.0/depthmap/" '
        f'GDepth:Format="RangeLinear" GDepth:Near="{NEAR}" GDepth:Far="{FAR}" GDepth:Mime="image/png" '
        f'GDepth:Data="{data}"/></rdf:RDF></x:xmpmeta>').encode()
    payload = b"http://ns.adobe.com/xap/1.0/\0" + xmp
    assert len(payload) < 65000
    segment = b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload
    path = tmp_path / "portrait.jpg"
    path.write_bytes(jpeg[:2] + segment + jpeg[2:])
    return path


@pytest.fixture
def portrait_photo(tmp_path):
    return gdepth_jpeg(tmp_path, scene(192, 144), depth_plane())


def test_read_depth_gives_metres(portrait_photo):
    depth = evanesco.read_depth(portrait_photo)
    plane = depth_plane()
    assert depth.kind == "depth" and depth.map.dtype == np.float32 and depth.map.shape == plane.shape
    # RangeLinear: near + v / 255 (far - near).
    expected = NEAR + plane.astype(np.float64) / 255 * (FAR - NEAR)
    assert np.allclose(depth.map, expected, atol=1e-5)
    assert depth.units == "m" and "GDepth" in depth.source
    assert depth.mattes == {}


def test_depth_extraction_same_as_the_command_line(tmp_path, portrait_photo, cli):
    run_cli(cli, "depth", "extract", str(portrait_photo), "-o", str(tmp_path / "cli.tif"))
    assert np.array_equal(evanesco.read_image(tmp_path / "cli.tif"), evanesco.read_depth(portrait_photo).map)


@pytest.mark.parametrize("effect", ["blur", "lens", "spotlight"])
def test_portrait_from_arrays_same_as_the_command_line(tmp_path, cli, effect):
    photo = scene(192, 144)
    metres = np.where(np.arange(144)[:, None] < 72, 1.0, 3.0).astype(np.float32) * np.ones((1, 192), np.float32)
    evanesco.write_image(tmp_path / "photo.png", photo)
    evanesco.write_image(tmp_path / "depth.tif", metres)
    run_cli(cli, "portrait", str(tmp_path / "photo.png"), "--depth-map", str(tmp_path / "depth.tif"), "--depth-kind",
            "depth", "--effect", effect, "--focus-distance", "1", "-o", str(tmp_path / "cli.png"))
    image, report = evanesco.portrait(photo, metres, depth_kind="depth", effect=effect, focus_distance=1)
    evanesco.write_image(tmp_path / "py.png", image)
    assert (tmp_path / "py.png").read_bytes() == (tmp_path / "cli.png").read_bytes()
    assert report["effect"] == effect
    # Near rows (in focus) are kept; far rows blurred or darkened.
    near = np.abs(image[10:60].astype(int) - photo[10:60]).mean()
    far = np.abs(image[90:140].astype(int) - photo[90:140]).mean()
    assert near < 1 and far > 1.5 and far > 4 * near, (near, far)


def test_portrait_of_a_file_same_as_the_command_line(tmp_path, portrait_photo, cli):
    run_cli(cli, "portrait", str(portrait_photo), "--effect", "lens", "--aperture", "6", "-o", str(tmp_path / "c.png"))
    image, _ = evanesco.portrait(portrait_photo, effect="lens", aperture=6)
    assert np.array_equal(image, evanesco.read_image(tmp_path / "c.png"))


def test_portrait_refusals(portrait_photo):
    photo = scene(64, 48)
    with pytest.raises(evanesco.SettingError, match="f_number"):
        evanesco.portrait(portrait_photo, effect="lens", f_number=-2)
    with pytest.raises(evanesco.SettingError, match="give only one of focus, focus_distance, focus_point"):
        evanesco.portrait(portrait_photo, focus=0.5, focus_distance=2)
    with pytest.raises(evanesco.InputError, match="the depth map is 30x40 but the photo is 64x48"):
        evanesco.portrait(photo, np.ones((40, 30), np.float32))
    with pytest.raises(evanesco.ArgumentError, match="needs its depth"):
        evanesco.portrait(photo)
    with pytest.raises(evanesco.InputError, match="primary.jpg"):
        evanesco.portrait(portrait_photo.with_name("primary.jpg"))
    with pytest.raises(evanesco.InputError, match="primary.jpg"):
        evanesco.read_depth(portrait_photo.with_name("primary.jpg"))


def test_backdrop_cuts_the_near_subject():
    height, width = 120, 160
    color = np.zeros((height, width, 3), np.uint8)
    color[...] = (200, 40, 40)
    metres = np.full((height, width), 3.0, np.float32)
    metres[30:90, 50:110] = 1.0
    beach = np.zeros((height, width, 3), np.uint8)
    beach[...] = (20, 60, 220)
    with evanesco.Backdrop(beach, subject="nearest") as session:
        for _ in range(3):
            out, info = session.process(color, metres)
    assert out.shape == color.shape and out.dtype == np.uint8
    assert np.abs(out[55:65, 75:85].astype(int) - (200, 40, 40)).max() <= 2  # the subject kept
    assert np.abs(out[5:15, 5:15].astype(int) - (20, 60, 220)).max() <= 2  # the far part replaced
    assert info["frame"] == 2 and abs(info["subject_depth"] - 1.0) < 0.05
    with pytest.raises(evanesco.ArgumentError, match="closed"):
        session.process(color, metres)


def test_backdrop_refusals():
    with pytest.raises(evanesco.SettingError, match="gamma"):
        evanesco.Backdrop(gamma=-1)
    with pytest.raises(evanesco.FileError, match="cascade"):
        evanesco.Backdrop(cascade="/nonexistent/cascade.xml")


DATA = Path(os.environ.get("EVANESCO_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
SHARED = DATA / "depth" / "truedepth-iphone" / "heic_depth_data.heic"


def test_an_iphone_portrait_gives_its_depth_and_mattes(tmp_path, cli):
    if not SHARED.is_file():
        pytest.skip(f"{SHARED} is absent (../shared/data): the iPhone portrait was not read")
    depth = evanesco.read_depth(SHARED)
    assert depth.map.dtype == np.float32 and depth.map.ndim == 2
    assert depth.kind in ("depth", "disparity") and depth.accuracy in ("absolute", "relative")
    assert list(depth.mattes) == ["portrait", "hair", "skin", "teeth", "glasses"]
    matte = depth.mattes["portrait"]
    assert matte.shape == (1544, 1158)
    run_cli(cli, "depth", "extract", str(SHARED), "-o", str(tmp_path / "map.tif"))
    assert np.array_equal(evanesco.read_image(tmp_path / "map.tif"), depth.map, equal_nan=True)
    run_cli(cli, "depth", "extract", str(SHARED), "--aux", "portrait", "-o", str(tmp_path / "matte.png"))
    assert np.array_equal(evanesco.read_image(tmp_path / "matte.png"), matte)
