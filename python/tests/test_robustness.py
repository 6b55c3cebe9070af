"""Odd but legal inputs reach the library and come back as a result or an evanesco.Error, never
as a crash of the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import evanesco


@pytest.mark.parametrize("size", [(1, 1), (2, 3), (3, 1)])
def test_tiny_images_never_abort(tmp_path, size):
    height, width = size
    rgb = np.full((height, width, 3), 100, np.uint8)
    metres = np.full((height, width), 2.0, np.float32)
    attempts = [
        lambda: evanesco.stack([rgb, rgb, rgb]),
        lambda: evanesco.stack([rgb, rgb, rgb], align="none"),
        lambda: evanesco.portrait(rgb, metres, depth_kind="depth", effect="lens"),
        lambda: evanesco.portrait(rgb, metres, effect="blur"),
        lambda: evanesco.Backdrop(subject="nearest").process(rgb, metres),
        lambda: evanesco.write_image(tmp_path / f"x{width}{height}.png", rgb),
    ]
    for attempt in attempts:
        try:
            attempt()
        except evanesco.Error as e:
            assert str(e) and "\n" not in str(e)


def test_holes_and_extremes_in_depth():
    rgb = np.full((48, 64, 3), 100, np.uint8)
    for depth in (np.full((48, 64), np.nan, np.float32), np.zeros((48, 64), np.float32),
                  np.full((48, 64), np.inf, np.float32), np.full((48, 64), 1e30, np.float32)):
        try:
            image, _ = evanesco.portrait(rgb, depth, effect="blur")
            assert image.shape == rgb.shape
        except evanesco.InputError as e:
            assert "depth" in str(e)
