"""Shared pieces of the Python suite: scenes the tests make themselves, and the command line,
whose outputs the package must reproduce byte for byte."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import evanesco


@pytest.fixture(scope="session")
def cli() -> str:
    """The `evanesco` command line of the same build ($EVANESCO_CLI; scripts/python-tests.sh sets it)."""
    path = os.environ.get("EVANESCO_CLI")
    if not path or not Path(path).is_file():
        pytest.skip("EVANESCO_CLI is not set to the evanesco binary: the comparisons with the command line did not run")
    return path


def run_cli(cli: str, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([cli, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def scene(width: int = 192, height: int = 144, seed: int = 7) -> np.ndarray:
    """A textured RGB scene with structure at several scales (alignment needs corners)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = 128 + 60 * np.sin(x / 7.0) * np.cos(y / 11.0) + 40 * np.sin((x + 2 * y) / 23.0)
    blocks = rng.integers(0, 90, size=(height // 12 + 1, width // 12 + 1)).astype(np.float32)
    base += np.kron(blocks, np.ones((12, 12), np.float32))[:height, :width] - 45
    rgb = np.stack([base, base * 0.8 + 30, 255 - base * 0.9], axis=-1)
    return np.clip(rgb, 0, 255).astype(np.uint8)


def burst(count: int = 5, square: int = 24) -> tuple[np.ndarray, list[np.ndarray]]:
    """A still scene and `count` frames of it with a white square at a different place in each,
    so that the square covers any pixel in at most one frame: a robust merge must give the scene."""
    clean = scene()
    frames = []
    for i in range(count):
        f = clean.copy()
        x0 = 10 + i * (square + 8)
        f[20:20 + square, x0:x0 + square] = 255
        frames.append(f)
    return clean, frames


def write_frames(folder: Path, frames: list[np.ndarray]) -> list[str]:
    paths = []
    for i, f in enumerate(frames):
        p = folder / f"frame{i:02d}.png"
        evanesco.write_image(p, f)
        paths.append(str(p))
    return paths
