#!/usr/bin/env python3
"""Self-test of ./dev, the README's set-up script: every missing prerequisite stops it
before any build starts, with exit code 2 and a message naming the prerequisite and the
one command that fixes it.

    python3 .ci/test_dev.py        (`./dev test` runs it)

Each case runs the real script with a PATH built from this machine's own: a directory of
symlinks to every program on PATH except the ones the case hides. `cargo` in that
directory is a recorder, so a case can tell whether the script got as far as building.
Nothing is installed (HEVO_SETUP_INSTALL=no or a mode that cannot apply), HEVO_HOME is an
empty temporary directory, and no case touches the network.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
DEV = Path(__file__).resolve().parent.parent / "dev"
#: A bound on one run of the check, far above its normal second, so a case that starts a
#: build fails instead of hanging.
LIMIT_S = 120


def fake_path(root: Path, hide: set[str], python: str | None = None) -> str:
    """A PATH of one directory holding every program on this machine's PATH but `hide`;
    `cargo` records its calls in root/cargo.log instead of building; `python3` is
    `python` (default: this interpreter)."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            src = os.path.join(d, name)
            dst = bin_dir / name
            if name in hide or dst.exists() or dst.is_symlink():
                continue
            if os.path.isfile(src) and os.access(src, os.X_OK):
                dst.symlink_to(src)
    for name in ("python3", "cargo"):
        (bin_dir / name).unlink(missing_ok=True)
    if "python3" not in hide:
        # A wrapper, not a symlink: a venv's python finds its pyvenv.cfg only when started
        # by its own path.
        wrap = bin_dir / "python3"
        wrap.write_text(f'#!/bin/sh\nexec "{python or os.path.realpath(sys.executable)}" "$@"\n')
        wrap.chmod(wrap.stat().st_mode | stat.S_IXUSR)
    if "cargo" not in hide:
        rec = bin_dir / "cargo"
        rec.write_text(f'#!/bin/sh\necho "$@" >> {root / "cargo.log"}\n')
        rec.chmod(rec.stat().st_mode | stat.S_IXUSR)
    return str(bin_dir)


class DevCheck(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="hevo-dev-test-")
        self.root = Path(self._tmp.name)
        self.home = self.root / "home"
        self.home.mkdir()

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def run_dev(self, args: list[str], hide: set[str] = frozenset(), python: str | None = None,
                **env: str) -> subprocess.CompletedProcess:
        full = {k: v for k, v in os.environ.items()
                if k not in ("LIBCLANG_PATH", "BINDGEN_EXTRA_CLANG_ARGS", "HEVO_SETUP_INSTALL",
                             "HEVO_SETUP_LIBCLANG_DIRS")}
        full.update(PATH=fake_path(self.root, set(hide), python), HEVO_HOME=str(self.home))
        full.update(env)
        return subprocess.run(["bash", str(DEV), *args], env=full, capture_output=True,
                              text=True, timeout=LIMIT_S)

    def cargo_calls(self) -> str:
        log = self.root / "cargo.log"
        return log.read_text() if log.exists() else ""

    def assert_stops(self, res: subprocess.CompletedProcess, *needles: str) -> None:
        self.assertEqual(res.returncode, 2, res.stderr)
        for n in needles:
            self.assertIn(n, res.stderr)
        self.assertEqual(self.cargo_calls(), "", "the script started cargo before stopping")

    def test_everything_present_passes_the_check(self) -> None:
        res = self.run_dev(["check"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("prerequisites ok", res.stderr)

    def test_demo_without_cmake_stops_before_building(self) -> None:
        res = self.run_dev(["demo"], hide={"cmake"}, HEVO_SETUP_INSTALL="no")
        self.assert_stops(res, "missing: cmake", "fix:", "apt-get install -y cmake",
                          "HEVO_SETUP_INSTALL=wheels ./dev demo")
        self.assertNotIn("missing: libclang", res.stderr)

    def test_test_without_cmake_stops_before_building(self) -> None:
        res = self.run_dev(["test"], hide={"cmake"}, HEVO_SETUP_INSTALL="no")
        self.assert_stops(res, "missing: cmake", "HEVO_SETUP_INSTALL=wheels ./dev test")

    def test_without_libclang_names_it(self) -> None:
        res = self.run_dev(["demo"], HEVO_SETUP_INSTALL="no", HEVO_SETUP_LIBCLANG_DIRS="")
        self.assert_stops(res, "missing: libclang", "clang libclang-dev")
        self.assertNotIn("missing: cmake", res.stderr)

    def test_libclang_path_is_honoured(self) -> None:
        lib = self.root / "lib"
        lib.mkdir()
        (lib / "libclang.so.1").write_bytes(b"")
        res = self.run_dev(["check"], HEVO_SETUP_LIBCLANG_DIRS="", LIBCLANG_PATH=str(lib))
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn(f"libclang in {lib}", res.stderr)

    def test_without_pip_names_it_and_the_apt_command(self) -> None:
        venv = self.root / "nopip"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        res = self.run_dev(["demo"], python=str(venv / "bin" / "python3"),
                           HEVO_SETUP_INSTALL="no")
        self.assert_stops(res, "missing: pip", "apt-get install -y python3-pip")

    def test_wheels_cannot_supply_pip(self) -> None:
        # The wheel path installs cmake and libclang only; without pip it stops at once.
        venv = self.root / "nopip"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        res = self.run_dev(["demo"], hide={"cmake"}, python=str(venv / "bin" / "python3"),
                           HEVO_SETUP_INSTALL="wheels")
        self.assert_stops(res, "missing: cmake", "missing: pip", "python3-pip")
        self.assertFalse((self.home / "toolchain").exists())

    def test_check_never_installs(self) -> None:
        res = self.run_dev(["check"], hide={"cmake"}, HEVO_SETUP_INSTALL="apt")
        self.assert_stops(res, "missing: cmake", "./dev demo")

    def test_an_unknown_mode_is_a_usage_error(self) -> None:
        res = self.run_dev(["demo"], hide={"cmake"}, HEVO_SETUP_INSTALL="sometimes")
        self.assert_stops(res, "HEVO_SETUP_INSTALL=sometimes")

    def test_an_unknown_command_prints_usage(self) -> None:
        res = self.run_dev(["bogus"])
        self.assert_stops(res, "./dev demo", "./dev test")


if __name__ == "__main__":
    unittest.main()
