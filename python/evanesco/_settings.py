"""Keyword arguments made from the library's own setting declarations (evn_settings).

Each setting's key becomes a keyword argument in snake_case (`winsorFraction`: `winsor_fraction`),
with its declared default; the library checks the values (range, type, choices) and its refusals
name the keyword. Nothing about a setting is restated here.
"""

from __future__ import annotations

import inspect
import json
import math
import re

import numpy as np

from . import _errors, _native


def snake(key: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(p[:1].upper() + p[1:] for p in rest)


class Declarations:
    """The settings of one kind of call ("stack", "portrait", "backdrop", "write")."""

    def __init__(self, kind: str):
        self.kind = kind
        self.settings = _native.settings(kind)
        self.keys = {snake(s["key"]): s["key"] for s in self.settings}
        self.names = {s["key"]: snake(s["key"]) for s in self.settings}
        # A range error names a number by its name in words ("winsor fraction"): the keyword too.
        self.words = {s["name"]: snake(s["key"]) for s in self.settings if s.get("name")}

    def default(self, s: dict):
        """The default shown in a signature: None where the library computes it or has none."""
        if s["kind"] == "text":
            return None
        if s["kind"] == "size":
            # As the library reads a size: "1G", not a byte count (a bare number is MB).
            return s["defaultText"]
        return s["default"]

    def parameters(self) -> list[inspect.Parameter]:
        return [
            inspect.Parameter(snake(s["key"]), inspect.Parameter.KEYWORD_ONLY, default=self.default(s))
            for s in self.settings
        ]

    def docs(self) -> str:
        lines = []
        for s in self.settings:
            values = describe(s)
            lines.append(f"    {snake(s['key'])}: {s['help']}" + (f" {values}" if values else ""))
        return "\n".join(lines)

    def json(self, given: dict) -> tuple[bytes, dict[str, str]]:
        """The arguments a caller gave (None left out: the library's default) as the JSON object
        the library reads, and the keyword each key came from, for the library's messages. A name
        that is no setting is passed on too: the library refuses it by name, with the near ones."""
        chosen, names = {}, {**self.names, **self.words}
        for name, value in given.items():
            if value is None:
                continue
            key = self.keys.get(name) or camel(name)
            names[key] = name
            chosen[key] = _plain(value)
            if isinstance(chosen[key], float) and not math.isfinite(chosen[key]):
                # JSON has no NaN or infinity; no setting allows them either.
                raise _errors.SettingError(f"{name} must be a finite number, not {chosen[key]}")
        return json.dumps(chosen).encode(), names


def describe(s: dict) -> str:
    if s["kind"] == "choice":
        return "One of: " + ", ".join(s["choices"]) + "."
    if s["kind"] in ("number", "size") and s.get("unit"):
        return f"Unit: {s['unit']}."
    return ""


def _plain(value):
    """numpy scalars and paths as JSON values."""
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "__fspath__"):
        return str(value.__fspath__())
    return value


def signature(function, leading: list[inspect.Parameter], declarations: Declarations, trailing=()):
    """Gives `function` (which takes **settings) the signature and help its declarations make."""
    function.__signature__ = inspect.Signature(leading + declarations.parameters() + list(trailing))
    function.__doc__ = (function.__doc__ or "") + "\n\nSettings (keyword arguments):\n" + declarations.docs() + "\n"
    return function
