"""The type stubs and the keyword arguments come from the library's declarations: the stubs in
the package are what tools/make_stubs.py writes today, and every declared choice is accepted."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

import evanesco
from conftest import burst

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))


def test_the_stubs_are_current():
    import make_stubs

    shipped = Path(evanesco.__file__).with_name("__init__.pyi").read_text()
    assert shipped == make_stubs.stubs(), "run python/tools/make_stubs.py: a setting changed"


@pytest.mark.parametrize("kind,function", [("stack", evanesco.stack), ("portrait", evanesco.portrait),
                                           ("backdrop", evanesco.Backdrop.__init__),
                                           ("write", evanesco.write_image)])
def test_every_declared_setting_is_a_keyword(kind, function):
    parameters = inspect.signature(function).parameters
    for s in evanesco.settings(kind):
        name = "".join("_" + c.lower() if c.isupper() else c for c in s["key"])
        assert name in parameters, name
        assert parameters[name].kind == inspect.Parameter.KEYWORD_ONLY


def test_every_declared_choice_is_accepted():
    _, frames = burst(3)
    for s in evanesco.settings("stack"):
        for value in s.get("choices", []):
            if value == "hdrplus":  # camera raws only: refused with a reason for RGB frames
                with pytest.raises(evanesco.InputError, match="Bayer camera raws"):
                    evanesco.stack(frames, merge=value)
                continue
            merged, report = evanesco.stack(frames, **{s["key"]: value})
            assert merged.shape == frames[0].shape


def test_the_library_is_the_packages_own():
    import os

    from evanesco import _native

    if os.environ.get("EVANESCO_LIBRARY"):
        pytest.skip("EVANESCO_LIBRARY names a library outside the package")
    assert Path(_native._library_path()).parent == Path(evanesco.__file__).parent
    assert evanesco.__version__ == evanesco._native.version()


def test_a_value_that_is_no_choice_names_the_choices():
    _, frames = burst(3)
    with pytest.raises(evanesco.SettingError, match='merge: must be one of .*robust.*, not "average"'):
        evanesco.stack(frames, merge="average")
    with pytest.raises(evanesco.SettingError, match='compression: must be one of fast, default, best, not "huge"'):
        evanesco.write_image("never.png", frames[0], compression="huge")
