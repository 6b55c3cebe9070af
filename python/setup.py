"""Builds the wheel: the Swift library (the C interface, libEvanescoC.so, with the Swift runtime and
Foundation linked in) through scripts/build-release.sh, copied into the package beside its Python
code. With EVANESCO_RELEASE_DIR set (CI), the library already built there is taken instead."""

import re
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    bdist_wheel = None

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VERSION = re.search(r'current = "([^"]+)"', (ROOT / "Sources/EvanescoCore/Version.swift").read_text()).group(1)


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        built = subprocess.run(
            [str(ROOT / "scripts/build-release.sh"), "EvanescoC"], cwd=ROOT, check=True, stdout=subprocess.PIPE,
            text=True).stdout.strip().splitlines()[-1]
        target = Path(self.build_lib) / "evanesco" / "libEvanescoC.so"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(built) / "libEvanescoC.so", target)
        # The symbols are not needed to run it: 70 MB become about 55.
        if shutil.which("strip"):
            subprocess.run(["strip", "--strip-unneeded", str(target)], check=True)


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library: a platform wheel, not a pure one."""

    def has_ext_modules(self):
        return True


commands = {"build_py": BuildWithLibrary}
if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        """Any Python 3 (the library is loaded with ctypes, not built against CPython), this platform."""

        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    commands["bdist_wheel"] = PlatformWheel

setup(version=VERSION, cmdclass=commands, distclass=BinaryDistribution)
