"""Evanesco from Python: burst stacking, depth photos, portrait effects and background
replacement on numpy arrays, by the same library as the `evanesco` command line.

    import evanesco
    clean, report = evanesco.stack(["b1.jpg", "b2.jpg", "b3.jpg"], merge="robust")
    evanesco.write_image("clean.png", clean)
    depth = evanesco.read_depth("portrait.heic")
    blurred, _ = evanesco.portrait("portrait.heic", effect="lens", f_number=2.8)

Arrays in and out are numpy: uint8, uint16 or float32, (height, width) or (height, width,
channels), C-contiguous or not. Settings are keyword arguments whose names, defaults and ranges
are the library's own (`help(evanesco.stack)` lists them). Errors are evanesco.Error subclasses
with the library's messages. The library runs without the GIL, so other threads go on meanwhile.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import threading
from dataclasses import dataclass, field

import numpy as np

from . import _native, _settings
from ._errors import ArgumentError, Cancelled, Error, FileError, InputError, SettingError

__all__ = [
    "stack", "read_depth", "DepthData", "portrait", "Backdrop", "read_image", "write_image", "settings",
    "Error", "SettingError", "ArgumentError", "FileError", "InputError", "Cancelled", "__version__",
]
__version__ = _native.version()

_STACK = _settings.Declarations("stack")
_PORTRAIT = _settings.Declarations("portrait")
_BACKDROP = _settings.Declarations("backdrop")
_WRITE = _settings.Declarations("write")


def settings(kind: str) -> list[dict]:
    """The library's declarations of the settings of `kind` ("stack", "portrait", "backdrop",
    "write"): key, kind, default, range, unit, choices and summary of each."""
    return _native.settings(kind)


def _path(p) -> bytes:
    return os.fsencode(os.fspath(p))


def read_image(path) -> np.ndarray:
    """Reads an image file (JPEG, PNG, TIFF, HEIC, PFM; a camera raw, finished), upright.

    Returns an array of shape (height, width) or (height, width, channels), dtype uint8, uint16
    or float32 as the file stores it.
    """
    image, texts = _native.Image(), _native.Texts("info", "message")
    _native.check(_native.lib.evn_read_image(_path(path), ctypes.byref(image), texts.ref("info"),
                                             texts.ref("message")), texts)
    texts.release()
    return _native.image_out(image)


def write_image(path, image, **settings) -> None:
    """Writes `image` to `path` atomically, in the format its extension names (an existing file is
    refused unless overwrite=True)."""
    view, keep = _native.image_in(image, "image")
    options, names = _WRITE.json(settings)
    texts = _native.Texts("message")
    _native.check(_native.lib.evn_write_image(_path(path), ctypes.byref(view), options, texts.ref("message")),
                  texts, names)
    del keep


_settings.signature(
    write_image,
    [inspect.Parameter("path", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("image", inspect.Parameter.POSITIONAL_OR_KEYWORD)],
    _WRITE)


class _Progress:
    """A Python progress callable as the library's callback. It is called on the library's
    threads (with the GIL); if it raises, the work is cancelled and the exception re-raised."""

    def __init__(self, function):
        self.function = function
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.callback = _native.PROGRESS(self.__call__)

    def __call__(self, context, stage, done, total):
        if self.error is not None:
            return 1
        try:
            self.function(stage.decode(), int(done), int(total))
            return 0
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            with self.lock:
                if self.error is None:
                    self.error = e
            return 1


def stack(frames, *, progress=None, **settings):
    """Aligns and merges a burst so that what moves vanishes and the noise averages out.

    frames: a list of arrays (one size and dtype) or of paths (images, camera raws, or one video).
    progress: called as progress(stage, done, total) while it works; raising in it cancels.

    Returns (image, report): the merged image as an array and the report as a dict (what
    `evanesco stack --report` writes).
    """
    if isinstance(frames, (str, bytes, os.PathLike)):
        frames = [frames]
    frames = list(frames)
    if not frames:
        raise ArgumentError("frames is empty: give arrays or paths of a burst")
    options, names = _STACK.json(settings)
    arrays, paths = None, None
    if all(isinstance(f, (str, bytes, os.PathLike)) for f in frames):
        encoded = [_path(f) for f in frames]
        paths = (ctypes.c_char_p * len(encoded))(*encoded)
    elif any(isinstance(f, (str, bytes, os.PathLike)) for f in frames):
        raise ArgumentError("frames mixes arrays and paths: give one kind")
    else:
        views = [_native.image_in(f, f"frames[{i}]") for i, f in enumerate(frames)]
        arrays = (_native.Image * len(views))(*[v for v, _ in views])
    hook = _Progress(progress) if progress is not None else None
    result, texts = _native.Image(), _native.Texts("report", "message")
    status = _native.lib.evn_stack(
        arrays, len(arrays) if arrays is not None else 0, paths, len(paths) if paths is not None else 0, options,
        hook.callback if hook else _native.PROGRESS(), None, ctypes.byref(result), texts.ref("report"),
        texts.ref("message"))
    if hook is not None and hook.error is not None:
        texts.release()
        raise Cancelled(f"the progress callback raised {hook.error!r}; the stack was cancelled") from hook.error
    _native.check(status, texts, names)
    return _native.image_out(result), texts.json("report")


_settings.signature(
    stack,
    [inspect.Parameter("frames", inspect.Parameter.POSITIONAL_OR_KEYWORD)],
    _STACK,
    [inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=None)])


@dataclass
class DepthData:
    """A depth photo's depth: `map` in its own units (float32, NaN for holes), what it is, and the
    mattes the file holds (portrait, hair, skin, teeth, glasses, sky) as arrays."""

    map: np.ndarray
    kind: str
    units: str
    accuracy: str | None
    source: str
    mattes: dict[str, np.ndarray] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)


def read_depth(path) -> DepthData:
    """Reads the depth map and the mattes of a portrait photo (iPhone HEIC/JPEG, GDepth, Dynamic
    Depth) as float data."""
    depth = _native.Image()
    mattes = ctypes.POINTER(_native.Image)()
    count = ctypes.c_int64(0)
    texts = _native.Texts("info", "message")
    _native.check(_native.lib.evn_read_depth(_path(path), ctypes.byref(depth), ctypes.byref(mattes),
                                             ctypes.byref(count), texts.ref("info"), texts.ref("message")), texts)
    info = texts.json("info")
    arrays = [_native.image_out(mattes[i]) for i in range(count.value)]
    if mattes:
        _native.lib.evn_free(mattes)
    d = info["summary"]["depth"]
    return DepthData(
        map=_native.image_out(depth), kind=d["kind"], units=d["units"], accuracy=d.get("accuracy"),
        source=d["source"], mattes=dict(zip(info["mattes"], arrays)), summary=info["summary"])


def portrait(photo, depth=None, *, depth_kind=None, **settings):
    """Renders a portrait effect: spotlight, colour highlight, focal or lens blur, or the mask.

    photo: a path of a portrait photo with its depth (its matte used when it has one), or an
    array, with `depth` then a (height, width) map of the photo's shape (any size) holding
    `depth_kind`: "disparity" (larger is nearer; the default, as depth models and stereo give) or
    "depth". float32 maps are read as metres (1/m for disparity), uint8 and uint16 maps as
    relative values, as the command line reads a `--depth-map`.

    Returns (image, report).
    """
    options, names = _PORTRAIT.json(settings)
    result, texts = _native.Image(), _native.Texts("report", "message")
    keep = []
    if isinstance(photo, (str, bytes, os.PathLike)):
        if depth is not None:
            raise ArgumentError("depth is read from the photo's file: give a path alone, or arrays")
        call = (_path(photo), None, None)
    else:
        if depth is None:
            raise ArgumentError("an array photo needs its depth: portrait(photo, depth)")
        p, keep_p = _native.image_in(photo, "photo")
        d, keep_d = _native.image_in(depth, "depth")
        keep = [keep_p, keep_d]
        call = (None, ctypes.byref(p), ctypes.byref(d))
    kind = depth_kind.encode() if depth_kind is not None else None
    status = _native.lib.evn_portrait(*call, kind, options, ctypes.byref(result), texts.ref("report"),
                                      texts.ref("message"))
    del keep
    _native.check(status, texts, names)
    return _native.image_out(result), texts.json("report")


_settings.signature(
    portrait,
    [inspect.Parameter("photo", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("depth", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
     inspect.Parameter("depth_kind", inspect.Parameter.KEYWORD_ONLY, default=None)],
    _PORTRAIT)


class Backdrop:
    """Background replacement on a colour + depth stream, frame by frame: the subject (the face,
    the nearest region or a point) is cut at its depth and composited over `background`.

        with evanesco.Backdrop(background=beach, subject="nearest") as b:
            for color, depth in frames:
                out, info = b.process(color, depth)
    """

    def __init__(self, background=None, *, cascade=None, **settings):
        options, self._names = _BACKDROP.json(settings)
        self._session = ctypes.c_void_p()
        texts = _native.Texts("message")
        view = None
        if background is not None:
            view, keep = _native.image_in(background, "background")
        status = _native.lib.evn_backdrop_new(
            options, ctypes.byref(view) if view is not None else None,
            _path(cascade) if cascade is not None else None, ctypes.byref(self._session), texts.ref("message"))
        _native.check(status, texts, self._names)
        self._lock = threading.Lock()

    def process(self, color, depth):
        """One frame: color (uint8 RGB) and depth (float32 metres or uint16 millimetres).
        Returns (image, info)."""
        c, keep_c = _native.image_in(color, "color")
        d, keep_d = _native.image_in(depth, "depth")
        result, texts = _native.Image(), _native.Texts("info", "message")
        with self._lock:
            if not self._session:
                raise ArgumentError("the Backdrop is closed")
            status = _native.lib.evn_backdrop_process(self._session, ctypes.byref(c), ctypes.byref(d),
                                                      ctypes.byref(result), texts.ref("info"), texts.ref("message"))
        del keep_c, keep_d
        _native.check(status, texts, self._names)
        return _native.image_out(result), texts.json("info")

    def close(self) -> None:
        with self._lock:
            if self._session:
                _native.lib.evn_backdrop_free(self._session)
                self._session = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_session", None):
            _native.lib.evn_backdrop_free(self._session)


_settings.signature(
    Backdrop.__init__,
    [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("background", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
     inspect.Parameter("cascade", inspect.Parameter.KEYWORD_ONLY, default=None)],
    _BACKDROP)
