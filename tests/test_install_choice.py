"""Which pinned set `make demo` / `make test` install, with a fake `nvidia-smi` on PATH and a fake
venv whose pip only logs (nothing is installed): the GPU set when a GPU is listed, the CUDA major
from the driver's header, the CPU set without one, the one-line fallback when the GPU set's pip
fails, and a stamp that notices a switch between the sets.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CHOOSER = REPO / "requirements" / "choose-constraints.py"
MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(MAKE is None, reason="make is not installed")

H200 = "GPU 0: NVIDIA H200 (UUID: GPU-5c1d0b6e-0000-0000-0000-000000000000)"


def header(driver: str, cuda: str | None) -> list[str]:
    cuda_part = f"CUDA Version: {cuda}" if cuda else ""
    return [
        "Mon Nov 30 10:00:00 2026",
        "+---------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {driver}   Driver Version: {driver}   {cuda_part} |",
        "|   0  NVIDIA H200                    On  |   00000000:19:00.0 Off |      0 |",
    ]


def shell_print(lines: list[str]) -> str:
    return "printf '%s\\n' " + " ".join("'" + line.replace("'", "") + "'" for line in lines)


def fake_bin(tmp_path: Path, *, listing: list[str] | None, status: int = 0,
             driver: str = "580.95.05", cuda: str | None = "13.0") -> Path:
    """A PATH folder with the tools make's recipes use and, unless listing is None, a fake
    nvidia-smi (-L prints listing and exits with status; no argument prints the header)."""
    folder = tmp_path / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    for tool in ("sh", "cat", "rm", "mkdir", "cp", "chmod", "echo", "test", "true"):
        found = shutil.which(tool)
        if found and not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    smi = folder / "nvidia-smi"
    if listing is None:
        smi.unlink(missing_ok=True)
        return folder
    smi.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -L ]; then {shell_print(listing)}; exit {status}; fi\n'
        f'if [ "$1" = --query-gpu=driver_version ]; then echo {driver}; exit 0; fi\n'
        f"{shell_print(header(driver, cuda))}\n"
    )
    smi.chmod(0o755)
    return folder


def clean_env(path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HARNESS_SET", "CONSTRAINTS", "EXTRAS", "MAKEFLAGS", "MFLAGS",
                        "MAKELEVEL")}
    env["PATH"] = str(path)
    env.update(extra)
    return env


def choose(path: Path, *args: str, **extra: str) -> tuple[str, str]:
    out = subprocess.run([sys.executable, str(CHOOSER), *args], env=clean_env(path, **extra),
                         capture_output=True, text=True, check=True).stdout
    assert out.count("\n") == 1, out
    name, _, why = out.strip().partition(" ")
    return name, why


def test_a_listed_gpu_with_a_cuda_13_driver_gets_the_cuda13_set(tmp_path: Path) -> None:
    name, why = choose(fake_bin(tmp_path, listing=[H200]))
    assert name == "cuda13"
    assert why == "NVIDIA H200 (GPU 0), driver 580.95.05 supports CUDA 13.0"


def test_a_cuda_12_driver_gets_the_cuda12_set(tmp_path: Path) -> None:
    name, why = choose(fake_bin(tmp_path, listing=[H200, H200.replace("GPU 0", "GPU 1")],
                                driver="550.54.15", cuda="12.4"))
    assert name == "cuda12"
    assert why == "NVIDIA H200 (GPU 0 and 1 more), driver 550.54.15 supports CUDA 12.4"


def test_a_driver_too_old_for_both_gpu_sets_gets_the_cpu_set_and_says_why(
        tmp_path: Path) -> None:
    name, why = choose(fake_bin(tmp_path, listing=[H200], driver="470.82.01", cuda="11.4"))
    assert name == "cpu"
    assert "supports only CUDA 11.4" in why and "need CUDA 12 or newer" in why


def test_a_header_without_cuda_version_falls_back_to_the_driver_version(
        tmp_path: Path) -> None:
    assert choose(fake_bin(tmp_path, listing=[H200], driver="580.65.06", cuda=None))[0] == "cuda13"
    assert choose(fake_bin(tmp_path, listing=[H200], driver="535.104.05", cuda=None))[0] == "cuda12"


def test_no_gpu_listed_or_no_nvidia_smi_gets_the_cpu_set(tmp_path: Path) -> None:
    assert choose(fake_bin(tmp_path, listing=None)) == (
        "cpu", "no NVIDIA GPU (nvidia-smi not found)")
    name, why = choose(fake_bin(tmp_path, listing=["No devices were found"], status=6))
    assert (name, why) == ("cpu", "no NVIDIA GPU (nvidia-smi -L: No devices were found)")
    failed = ["NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."]
    assert choose(fake_bin(tmp_path, listing=failed, status=9))[0] == "cpu"


def test_harness_set_forces_a_set(tmp_path: Path) -> None:
    folder = fake_bin(tmp_path, listing=[H200])
    assert choose(folder, "cpu") == ("cpu", "HARNESS_SET=cpu chose it")
    assert choose(folder, HARNESS_SET="cuda12")[0] == "cuda12"
    assert choose(folder, "auto")[0] == "cuda13"
    assert choose(fake_bin(tmp_path, listing=None), "cuda13")[0] == "cuda13"
    assert choose(folder, "rocm")[0] == "cpu"


# make, run for real on a fake venv: its python -m pip logs its arguments and fails for the
# files named in $FAIL_PIP_FOR; the fake base python makes such a venv and runs the chooser.
FAKE_VENV_PYTHON = """#!/bin/sh
echo "python $*" >> "$INSTALL_LOG"
for bad in $FAIL_PIP_FOR; do
  case "$*" in *"install"*"$bad"*)
    echo "ERROR: No matching distribution found for jax-cuda13-plugin==0.10.2" >&2; exit 1;;
  esac
done
exit 0
"""


def fake_python(tmp_path: Path) -> Path:
    template = tmp_path / "venv-python"
    template.write_text(FAKE_VENV_PYTHON)
    base = tmp_path / "python"
    base.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -m ] && [ "$2" = venv ]; then\n'
        '  echo "venv $3" >> "$INSTALL_LOG"; mkdir -p "$3/bin"\n'
        f'  cp {template} "$3/bin/python"; chmod 755 "$3/bin/python"; exit 0\n'
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    base.chmod(0o755)
    return base


def make(tmp_path: Path, path: Path, *targets: str, dry: bool = False,
         fail_pip_for: str = "") -> tuple[str, list[str]]:
    log = tmp_path / "install.log"
    log.unlink(missing_ok=True)
    venv = tmp_path / "venv"
    args = [str(MAKE), "--no-print-directory", "-C", str(REPO), *(["-n"] if dry else []),
            f"VENV={venv}", f"PYTHON={fake_python(tmp_path)}", *targets]
    env = clean_env(path, INSTALL_LOG=str(log), FAIL_PIP_FOR=fail_pip_for)
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, log.read_text().splitlines() if log.exists() else []


@needs_make
def test_make_demo_installs_the_gpu_set_when_nvidia_smi_lists_a_gpu(tmp_path: Path) -> None:
    out, _ = make(tmp_path, fake_bin(tmp_path, listing=[H200]), "demo", dry=True)
    assert ("pip install -q --no-compile -c requirements/constraints-gpu.txt "
            "-e '.[torch,jax,keras,slurm,gpu,test]' 'tensorflow[and-cuda]' 'jax[cuda13]'") in out
    assert ("echo 'installing the GPU set for CUDA 13 (requirements/constraints-gpu.txt): "
            "NVIDIA H200 (GPU 0), driver 580.95.05 supports CUDA 13.0'") in out
    out12, _ = make(tmp_path, fake_bin(tmp_path, listing=[H200], cuda="12.8"), "demo", dry=True)
    assert "-c requirements/constraints-gpu-cuda12.txt" in out12 and "'jax[cuda12]'" in out12


@needs_make
def test_make_demo_installs_the_cpu_set_without_a_gpu(tmp_path: Path) -> None:
    for listing in (None, ["No devices were found"]):
        out, _ = make(tmp_path, fake_bin(tmp_path, listing=listing, status=6), "demo", dry=True)
        assert ("pip install -q --no-compile -c requirements/constraints.txt "
                "-e '.[all,test]' ;") in out
        assert "constraints-gpu" not in out and "cuda13" not in out
        assert "echo 'installing the CPU set (requirements/constraints.txt): no NVIDIA GPU" in out


@needs_make
def test_a_gpu_set_that_fails_to_install_says_so_and_installs_the_cpu_set(
        tmp_path: Path) -> None:
    gpu = fake_bin(tmp_path, listing=[H200])
    stamp = tmp_path / "venv" / ".installed"
    out, log = make(tmp_path, gpu, str(stamp), fail_pip_for="constraints-gpu.txt")
    lines = out.splitlines()
    fallback = [line for line in lines if "could not be installed" in line]
    assert fallback == [
        f"the GPU set for CUDA 13 could not be installed (pip above): installing the CPU set "
        f"(requirements/constraints.txt) in a new {tmp_path / 'venv'} instead; docs/gpu.md says "
        "how to choose by hand"]
    installs = [line for line in log if line.startswith(("venv", "python -m pip install"))]
    assert installs[0] == f"venv {tmp_path / 'venv'}"
    assert "-c requirements/constraints-gpu.txt" in installs[1]
    assert installs[2] == f"venv {tmp_path / 'venv'}"
    assert installs[3] == ("python -m pip install -q --no-compile -c requirements/constraints.txt "
                           "-e .[all,test]")
    # The bytecode is compiled once, after the set that stayed was installed, on every core.
    compiled = [line for line in log if "compileall" in line]
    assert compiled == [f"python -m compileall -q -j 0 {tmp_path / 'venv'}/lib"]
    assert log.index(compiled[0]) > log.index(installs[3])
    assert stamp.read_text().split() == ["cuda13", "requirements/constraints-gpu.txt", "cpu"]
    # The fallback is remembered: the next make does not try the GPU set again.
    out, log = make(tmp_path, gpu, str(stamp), fail_pip_for="constraints-gpu.txt")
    assert log == [] and "is up to date" in out


@needs_make
def test_the_stamp_notices_a_switch_between_the_sets(tmp_path: Path) -> None:
    stamp = tmp_path / "venv" / ".installed"
    cpu = fake_bin(tmp_path / "cpu", listing=None)
    gpu = fake_bin(tmp_path / "gpu", listing=[H200])
    out, log = make(tmp_path, cpu, str(stamp))
    assert stamp.read_text().split() == ["cpu", "requirements/constraints.txt", "cpu"]
    out, log = make(tmp_path, cpu, str(stamp))
    assert log == [] and "is up to date" in out
    # The same venv on a machine that now has a GPU: a new venv, the GPU set.
    out, log = make(tmp_path, gpu, str(stamp))
    assert (f"the venv holds the CPU set; this machine gets the GPU set for CUDA 13: a new "
            f"{tmp_path / 'venv'}") in out.splitlines()
    assert log[0] == f"venv {tmp_path / 'venv'}"
    assert any("-c requirements/constraints-gpu.txt" in line for line in log)
    assert stamp.read_text().split() == ["cuda13", "requirements/constraints-gpu.txt", "cuda13"]
    # And back: the GPU venv where no GPU is listed gets the CPU set in a new venv.
    out, log = make(tmp_path, cpu, str(stamp))
    assert "the venv holds the GPU set for CUDA 13; this machine gets the CPU set" in out
    assert stamp.read_text().split() == ["cpu", "requirements/constraints.txt", "cpu"]


@needs_make
def test_a_stamp_from_before_the_sets_counts_as_the_cpu_set(tmp_path: Path) -> None:
    stamp = tmp_path / "venv" / ".installed"
    cpu = fake_bin(tmp_path, listing=None)
    make(tmp_path, cpu, str(stamp))
    stamp.write_text("")  # what `touch` left before
    out, log = make(tmp_path, cpu, str(stamp))
    assert log == [] and "is up to date" in out
