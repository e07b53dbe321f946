"""Which pinned set `make demo` / `make test` install: cpu, cuda13 or cuda12.

Standard library only; installs nothing, so tests run it with a fake `nvidia-smi` on PATH.
Prints one line: the set's name, then why it was chosen (the Makefile maps the name to its
constraints file, extras and requirements and prints the reason before installing):

    cuda13 NVIDIA H200 (GPU 0), driver 580.95.05 supports CUDA 13.0

- `nvidia-smi -L` lists no GPU, fails or is absent: cpu.
- A GPU, and the driver's CUDA version (the "CUDA Version" in `nvidia-smi`'s header) is 13 or
  newer: cuda13 (requirements/constraints-gpu.txt); 12.x: cuda12
  (requirements/constraints-gpu-cuda12.txt); older: cpu, saying the driver is too old.
- Not Linux on x86_64 or aarch64 (the CUDA wheels of JAX and TensorFlow are Linux only): cpu.
- The first argument or $HARNESS_SET (cpu, cuda13, cuda12) forces a set; "auto" or empty
  chooses as above.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys

SETS = ("cpu", "cuda13", "cuda12")
# nvidia-smi answers in well under a second on a healthy machine; a hung driver must not hang make.
TIMEOUT_S = 30
# The driver versions that first supported CUDA 13.0 and 12.0 (Linux), for an nvidia-smi whose
# header lacks "CUDA Version".
DRIVER_FOR_CUDA = (((580, 0), (13, 0)), ((525, 60), (12, 0)))


def _run(args: list[str]) -> tuple[int, str]:
    """(exit status, stdout + stderr) of a command; 127 when it is not on PATH."""
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False)
    except FileNotFoundError:
        return 127, ""
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 126, str(exc)
    return proc.returncode, (proc.stdout or "") + (proc.stderr or "")


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no output"


def _driver_cuda() -> tuple[tuple[int, int] | None, str]:
    """The CUDA version the driver supports and the driver's version, from nvidia-smi."""
    _, header = _run(["nvidia-smi"])
    driver = re.search(r"Driver Version:\s*([\d.]+)", header)
    driver_text = driver.group(1) if driver else ""
    cuda = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", header)
    if cuda:
        return (int(cuda.group(1)), int(cuda.group(2))), driver_text
    if not driver_text:
        _, out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        driver_text = _first_line(out) if re.match(r"^\s*\d+\.\d+", out) else ""
    parts = [int(p) for p in re.findall(r"\d+", driver_text)[:2]]
    if len(parts) == 2:
        for first_driver, cuda_version in DRIVER_FOR_CUDA:
            if tuple(parts) >= first_driver:
                return cuda_version, driver_text
    return None, driver_text


def choose(forced: str = "") -> tuple[str, str]:
    """(set name, why) for this machine."""
    forced = forced.strip().lower()
    if forced and forced != "auto":
        if forced not in SETS:
            return "cpu", (f"HARNESS_SET={forced} is not one of {', '.join(SETS)} or auto: "
                           "the CPU set")
        return forced, f"HARNESS_SET={forced} chose it"
    status, listing = _run(["nvidia-smi", "-L"])
    if status == 127:
        return "cpu", "no NVIDIA GPU (nvidia-smi not found)"
    gpus = re.findall(r"^GPU (\d+): (.+?)(?: \(UUID: .*\))?$", listing, re.MULTILINE)
    if status != 0 or not gpus:
        return "cpu", f"no NVIDIA GPU (nvidia-smi -L: {_first_line(listing)})"
    index, name = gpus[0]
    more = f" and {len(gpus) - 1} more" if len(gpus) > 1 else ""
    gpu = f"{name} (GPU {index}{more})"
    system, machine = platform.system(), platform.machine().lower()
    if system != "Linux" or machine not in ("x86_64", "amd64", "aarch64", "arm64"):
        return "cpu", (f"{gpu}, but the CUDA wheels of JAX and TensorFlow are for Linux "
                       f"x86_64/aarch64, not {system} {machine}: the CPU set instead")
    cuda, driver = _driver_cuda()
    by_driver = f"driver {driver}" if driver else "the driver"
    if cuda is None:
        return "cpu", (f"{gpu}, but nvidia-smi says neither the driver's CUDA version nor its "
                       "version: the CPU set instead")
    cuda_text = f"{cuda[0]}.{cuda[1]}"
    if cuda >= (13, 0):
        return "cuda13", f"{gpu}, {by_driver} supports CUDA {cuda_text}"
    if cuda >= (12, 0):
        return "cuda12", f"{gpu}, {by_driver} supports CUDA {cuda_text}"
    return "cpu", (f"{gpu}, but {by_driver} supports only CUDA {cuda_text} and the GPU sets "
                   "need CUDA 12 or newer: the CPU set instead (update the driver)")


def main(argv: list[str]) -> int:
    forced = argv[1] if len(argv) > 1 else os.environ.get("HARNESS_SET", "")
    name, why = choose(forced)
    # make reads this through $(shell ...) and echoes it in single quotes.
    print(name, why.replace("'", "").replace("$", "").replace("\n", " "))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
