"""The built wheel installs one top-level package, and the CLI runs from it alone.

`pip wheel .` builds what a user installs; the wheel goes into a new virtual environment, which
reaches this environment's third-party packages (numpy, pandas, torch ...) through a path file
but not the checkout: the command runs in an empty folder with no PYTHONPATH, so every module it
imports, workers' included, comes from the installed wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def build_wheel(into: Path) -> Path:
    """The wheel of a copy of the checkout (setuptools builds in the source folder)."""
    source = into / "source"
    for name in ("harness", "backends", "workloads"):  # harness/'s two links stay links
        shutil.copytree(ROOT / name, source / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(into), str(source)], check=True,
                   timeout=300)
    (wheel,) = into.glob("*.whl")
    return wheel


def top_level_names(wheel: Path) -> tuple[list[str], set[str]]:
    """(top_level.txt's lines, the first path component of every file the wheel holds)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (listing,) = [name for name in names if name.endswith(".dist-info/top_level.txt")]
        declared = archive.read(listing).decode().split()
    return declared, {name.split("/")[0] for name in names if ".dist-info/" not in name}


def new_venv_with(wheel: Path, where: Path) -> Path:
    """A new venv holding the wheel; third-party packages reached through a .pth file.

    This environment's pip installs into it where it can (pip's --python, pip 22.3 on): a
    pip of the venv's own (ensurepip) costs seconds and is not what is tested."""
    outer_pip = tuple(int(part) for part in version("pip").split(".")[:2])
    venv.EnvBuilder(with_pip=outer_pip < (22, 3)).create(where)
    python = where / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)] if outer_pip >= (22, 3) \
        else [str(python), "-m", "pip"]
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   timeout=300)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True).stdout
    # Appended after the venv's own site-packages, so its `harness` wins; this environment's
    # editable-install hook is a .pth inside that folder and is not run for an appended path.
    Path(site.strip(), "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(base / "dist")
    return wheel, new_venv_with(wheel, base / "venv")


def test_the_wheel_holds_one_top_level_package(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    declared, present = top_level_names(wheel)
    assert declared == ["harness"]
    assert present == {"harness"}, present
    assert wheel.name.startswith("crossframe_harness-"), wheel.name


def test_compare_runs_from_the_installed_wheel(installed: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    _, python = installed
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import harness.backends.torch as b; "
                            "print(b.__file__)"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, check=True).stdout.strip()
    assert where.startswith(str(python.parents[1])), where  # the wheel's files, not the checkout
    done = subprocess.run([str(python.parent / "harness"), "compare", "--workload", "matmul",
                           "--quick", "--device", "cpu", "--out", "out"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (tmp_path / "out").iterdir()
    assert (run_dir / "run.json").is_file()
    assert "ok" in done.stdout
