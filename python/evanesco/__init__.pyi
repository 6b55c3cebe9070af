"""Type stubs of the evanesco package, written by python/tools/make_stubs.py from the library's
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
def write_image(
    path: _Path,
    image: _Array,
    *,
    quality: int | None = ...,
    bit_depth: Literal['keep', '8', '16', '32'] | None = ...,
    compression: Literal['fast', 'default', 'best'] | None = ...,
    overwrite: bool | None = ...,
) -> None: ...
def stack(
    frames: Sequence[_Array] | Sequence[_Path] | _Path,
    *,
    align: Literal['auto', 'none', 'translation', 'homography', 'local'] | None = ...,
    merge: Literal['mean', 'mode', 'median', 'sigma-clip', 'winsorized', 'robust', 'hdrplus'] | None = ...,
    reference: int | None = ...,
    interpolation: Literal['nearest', 'bilinear', 'bicubic', 'catmull-rom'] | None = ...,
    raw_sampling: Literal['sites', 'colour'] | None = ...,
    raw_denoise: float | None = ...,
    kappa: float | None = ...,
    winsor_fraction: float | None = ...,
    align_level: int | None = ...,
    half_resolution_alignment_above: int | None = ...,
    video_frames: int | None = ...,
    memory_limit: int | float | str | None = ...,
    spill_directory: str | None = ...,
    mean_for_two_frames: bool | None = ...,
    progress: Callable[[str, int, int], object] | None = ...,
) -> tuple[_Array, dict[str, Any]]: ...
def portrait(
    photo: _Array | _Path,
    depth: _Array | None = ...,
    *,
    depth_kind: Literal['depth', 'disparity'] | None = ...,
    effect: Literal['depth', 'mask', 'spotlight', 'color', 'blur', 'lens'] | None = ...,
    focus: float | None = ...,
    focus_distance: float | None = ...,
    focus_point: str | None = ...,
    slope: float | None = ...,
    width: float | None = ...,
    radius: float | None = ...,
    levels: int | None = ...,
    refine: Literal['none', 'photo', 'matte', 'auto'] | None = ...,
    protect_subject: bool | None = ...,
    aperture: float | None = ...,
    f_number: float | None = ...,
    blades: int | None = ...,
    blade_rotation: float | None = ...,
    cat_eye: float | None = ...,
    highlights: float | None = ...,
) -> tuple[_Array, dict[str, Any]]: ...

class Backdrop:
    def __init__(
        self,
        background: _Array | None = ...,
        *,
        cascade: _Path | None = ...,
        subject: str | None = ...,
        cutoff_offset: float | None = ...,
        blur: float | None = ...,
        gamma: float | None = ...,
        temporal: float | None = ...,
        refine: bool | None = ...,
        gap_snap: bool | None = ...,
        fill_holes: bool | None = ...,
        core_depth: float | None = ...,
        detect_every: int | None = ...,
        depth_format: str | None = ...,
        face_working_size: int | None = ...,
        face_min_size: int | None = ...,
    ) -> None: ...
    def process(self, color: _Array, depth: _Array) -> tuple[_Array, dict[str, Any]]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Backdrop: ...
    def __exit__(self, *exc: object) -> None: ...
