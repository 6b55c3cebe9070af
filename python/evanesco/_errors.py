"""Evanesco's exceptions: one class per evn_status, all under evanesco.Error."""

from __future__ import annotations

import re


class Error(Exception):
    """Anything the library refused or failed at; the message is the library's own."""

    status = 6


class SettingError(Error, ValueError):
    """A keyword argument is unknown, of the wrong type or out of range (its name is given)."""

    status = 1


class ArgumentError(Error, ValueError):
    """An argument is not usable: an array of the wrong shape or dtype, a missing input."""

    status = 2


class FileError(Error, OSError):
    """A file could not be read or written: missing, unreadable, damaged, or there already."""

    status = 3


class InputError(Error, ValueError):
    """The input cannot be processed as asked: frames of different sizes, a photo without depth."""

    status = 4


class Cancelled(Error):
    """The work was stopped by the progress callback; nothing was returned."""

    status = 5


_BY_STATUS = {c.status: c for c in (SettingError, ArgumentError, FileError, InputError, Cancelled)}


def from_status(status: int, message: str, names: dict[str, str] | None = None) -> Error:
    """The exception for a failed call; `names` maps the library's keys to the keyword arguments
    that carry them, so the message names what the caller wrote."""
    if names and status == SettingError.status:
        for key, argument in names.items():
            if key != argument:
                message = re.sub(rf"\b{re.escape(key)}\b", argument, message)
    return _BY_STATUS.get(status, Error)(message)
