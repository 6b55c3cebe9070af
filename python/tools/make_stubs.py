"""Writes evanesco/__init__.pyi, the type stubs editors complete from, out of the library's own
setting declarations (the keyword arguments, their types and choices). Run it after a setting
changes; tests/test_stubs.py fails while the stubs are out of date.

    EVANESCO_LIBRARY=.build/release/libEvanescoC.so python3 python/tools/make_stubs.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evanesco import _settings  # noqa: E402

HEADER = '''"""Type stubs of the evanesco package, written by python/tools/make_stubs.py from the library's
setting declarations: do not edit by hand."""

from os import PathLike
from typing import Any, Callable, Literal, Sequence, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, bytes, PathLike]
_Array = npt.NDArray[Union[np.uint8, np.uint16, np.float32]]

__version__: str

class Error(Exception): ...
class SettingError(Error, ValueError): ...
class ArgumentError(Error, ValueError): ...
class FileError(Error, OSError): ...
class InputError(Error, ValueError): ...
class Cancelled(Error): ...

class DepthData:
    map: npt.NDArray[np.float32]
    kind: str
    units: str
    accuracy: str | None
    source: str
    mattes: dict[str, _Array]
    summary: dict[str, Any]

def settings(kind: str) -> list[dict[str, Any]]: ...
def read_image(path: _Path) -> _Array: ...
def read_depth(path: _Path) -> DepthData: ...
'''


def annotation(s: dict) -> str:
    kind = s["kind"]
    if kind == "number":
        return "int | None" if s["integer"] else "float | None"
    if kind == "size":
        return "int | float | str | None"
    if kind == "choice":
        return "Literal[" + ", ".join(repr(c) for c in s["choices"]) + "] | None"
    if kind == "toggle":
        return "bool | None"
    return "str | None"


def keywords(kind: str) -> str:
    d = _settings.Declarations(kind)
    return "".join(f"    {_settings.snake(s['key'])}: {annotation(s)} = ...,\n" for s in d.settings)


def stubs() -> str:
    return (
        HEADER
        + "def write_image(\n    path: _Path,\n    image: _Array,\n    *,\n" + keywords("write") + ") -> None: ...\n"
        + "def stack(\n    frames: Sequence[_Array] | Sequence[_Path] | _Path,\n    *,\n" + keywords("stack")
        + "    progress: Callable[[str, int, int], object] | None = ...,\n"
        + ") -> tuple[_Array, dict[str, Any]]: ...\n"
        + "def portrait(\n    photo: _Array | _Path,\n    depth: _Array | None = ...,\n    *,\n"
        + "    depth_kind: Literal['depth', 'disparity'] | None = ...,\n" + keywords("portrait")
        + ") -> tuple[_Array, dict[str, Any]]: ...\n"
        + "\nclass Backdrop:\n    def __init__(\n        self,\n        background: _Array | None = ...,\n        *,\n"
        + "        cascade: _Path | None = ...,\n"
        + keywords("backdrop").replace("\n    ", "\n        ").replace("    ", "        ", 1)
        + "    ) -> None: ...\n"
        + "    def process(self, color: _Array, depth: _Array) -> tuple[_Array, dict[str, Any]]: ...\n"
        + "    def close(self) -> None: ...\n"
        + "    def __enter__(self) -> Backdrop: ...\n"
        + "    def __exit__(self, *exc: object) -> None: ...\n"
    )


if __name__ == "__main__":
    target = Path(__file__).resolve().parents[1] / "evanesco" / "__init__.pyi"
    target.write_text(stubs())
    print(f"wrote {target}")
