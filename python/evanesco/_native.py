"""The C interface of libEvanescoC (Sources/CEvanesco/include/evanesco.h) through ctypes.

ctypes releases the GIL for the whole of every call into the library, so other Python threads
run while it works; a progress callback takes the GIL back only while it runs.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

import numpy as np

from . import _errors

EVN_UINT8, EVN_UINT16, EVN_FLOAT32 = 1, 2, 3
_TYPES = {np.dtype(np.uint8): EVN_UINT8, np.dtype(np.uint16): EVN_UINT16, np.dtype(np.float32): EVN_FLOAT32}
_DTYPES = {v: k for k, v in _TYPES.items()}


class Image(ctypes.Structure):
    """evn_image: a view of samples with byte strides."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("width", ctypes.c_int64),
        ("height", ctypes.c_int64),
        ("channels", ctypes.c_int64),
        ("row_stride", ctypes.c_int64),
        ("pixel_stride", ctypes.c_int64),
        ("channel_stride", ctypes.c_int64),
        ("sample_type", ctypes.c_int32),
    ]


PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)
_text = ctypes.POINTER(ctypes.c_char)
_out_text = ctypes.POINTER(_text)
_image_p = ctypes.POINTER(Image)


def _library_path() -> str:
    """The library next to this file (the wheel's), or $EVANESCO_LIBRARY."""
    override = os.environ.get("EVANESCO_LIBRARY")
    if override:
        return override
    return str(Path(__file__).with_name("libEvanescoC.so"))


lib = ctypes.CDLL(_library_path())
_status = ctypes.c_int32
_PROTOTYPES = {
    "evn_version": (ctypes.c_char_p, []),
    "evn_free": (None, [ctypes.c_void_p]),
    "evn_settings": (_status, [ctypes.c_char_p, _out_text, _out_text]),
    "evn_read_image": (_status, [ctypes.c_char_p, _image_p, _out_text, _out_text]),
    "evn_write_image": (_status, [ctypes.c_char_p, _image_p, ctypes.c_char_p, _out_text]),
    "evn_stack": (
        _status,
        [_image_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int64, ctypes.c_char_p, PROGRESS,
         ctypes.c_void_p, _image_p, _out_text, _out_text],
    ),
    "evn_read_depth": (
        _status,
        [ctypes.c_char_p, _image_p, ctypes.POINTER(_image_p), ctypes.POINTER(ctypes.c_int64), _out_text, _out_text],
    ),
    "evn_portrait": (
        _status,
        [ctypes.c_char_p, _image_p, _image_p, ctypes.c_char_p, ctypes.c_char_p, _image_p, _out_text, _out_text],
    ),
    "evn_backdrop_new": (
        _status, [ctypes.c_char_p, _image_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), _out_text]
    ),
    "evn_backdrop_process": (_status, [ctypes.c_void_p, _image_p, _image_p, _image_p, _out_text, _out_text]),
    "evn_backdrop_free": (None, [ctypes.c_void_p]),
}
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _function = getattr(lib, _name)
    _function.restype = _restype
    _function.argtypes = _argtypes


def version() -> str:
    return lib.evn_version().decode()


class Texts:
    """The text outputs of one call (a message, a report), freed by the library once read."""

    def __init__(self, *names: str):
        self.pointers = {n: _text() for n in names}

    def ref(self, name: str):
        return ctypes.byref(self.pointers[name])

    def take(self, name: str) -> str | None:
        p = self.pointers[name]
        if not p:
            return None
        text = ctypes.cast(p, ctypes.c_char_p).value.decode("utf-8", "replace")
        lib.evn_free(p)
        self.pointers[name] = _text()
        return text

    def json(self, name: str):
        text = self.take(name)
        return None if text is None else json.loads(text)

    def release(self):
        for n in list(self.pointers):
            self.take(n)


def check(status: int, texts: Texts, names=None) -> None:
    """Raises the library's error for a failed call (releasing every text it returned)."""
    if status == 0:
        return
    message = texts.take("message") or "the library failed without a message"
    texts.release()
    raise _errors.from_status(status, message, names)


def image_in(array: np.ndarray, name: str) -> tuple[Image, np.ndarray]:
    """A view of `array` for the library: no copy when its dtype is one the library reads.

    Returns the description and the array it points into, which must stay alive for the call.
    """
    if not isinstance(array, np.ndarray):
        array = np.asarray(array)
    if array.dtype not in _TYPES:
        raise _errors.ArgumentError(
            f"{name}: dtype {array.dtype} is not one of uint8, uint16, float32 "
            f"(convert it with .astype(numpy.float32), say)")
    if array.ndim == 2:
        height, width = array.shape
        channels, channel_stride = 1, array.itemsize
        row_stride, pixel_stride = array.strides
    elif array.ndim == 3:
        height, width, channels = array.shape
        row_stride, pixel_stride, channel_stride = array.strides
    else:
        raise _errors.ArgumentError(
            f"{name}: an image is an array of shape (height, width) or (height, width, channels), "
            f"not {array.shape}")
    if array.size == 0:
        raise _errors.ArgumentError(f"{name}: the array is empty (shape {array.shape})")
    view = Image(array.ctypes.data, width, height, channels, row_stride, pixel_stride, channel_stride,
                 _TYPES[array.dtype])
    return view, array


class _Samples:
    """Owns samples the library returned; numpy arrays over them keep it alive, and it frees
    them when the last one goes."""

    def __init__(self, image: Image):
        self.pointer = image.data
        dtype = _DTYPES[image.sample_type]
        shape = (image.height, image.width) if image.channels == 1 else (image.height, image.width, image.channels)
        self.__array_interface__ = {
            "shape": shape, "typestr": dtype.str, "data": (image.data, False), "version": 3,
        }

    def __del__(self):
        if self.pointer:
            lib.evn_free(self.pointer)
            self.pointer = None


def image_out(image: Image) -> np.ndarray:
    """The library's image as a numpy array over the same memory (no copy)."""
    return np.asarray(_Samples(image))


def settings(kind: str) -> list[dict]:
    texts = Texts("json", "message")
    check(lib.evn_settings(kind.encode(), texts.ref("json"), texts.ref("message")), texts)
    return texts.json("json")
