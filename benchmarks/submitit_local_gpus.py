"""Check on a multi-GPU machine that each GPU cell of the SLURM executor gets its own GPU.

    PYTHONPATH=$PWD python3 benchmarks/submitit_local_gpus.py --out /tmp/pin [--framework torch]

No SLURM needed: submitit's local executor runs the tasks (all at once), and gives every task
the same CUDA_VISIBLE_DEVICES; the harness pins each cuda:N cell to GPU N itself. Prints one
line per cell: status, the GPU the task exposed (CUDA_VISIBLE_DEVICES) and the device the
worker opened; exits 1 unless every GPU cell ran on its own GPU. Timings from this run are
not for comparison: cells share the machine while they run concurrently.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402
from harness.measure.envinfo import nvidia_gpus  # noqa: E402
from harness.run.executors.slurm import SlurmExecutor  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results")
    parser.add_argument("--framework", default="torch")
    args = parser.parse_args()
    gpus = nvidia_gpus()
    devices = ["cpu"] + [f"cuda:{index}" for index in range(len(gpus))]
    print(f"gpus (nvidia-smi): {gpus or 'none'}; cells on {', '.join(devices)}")
    result = harness.compare("matmul", frameworks=args.framework, devices=devices,
                             sizes=[1024], quick=True, out=args.out, ceilings=False,
                             report=False, executor=SlurmExecutor(cluster="local", poll_s=0.5))
    pinned_right = True
    for cell in result.cells:
        slurm = cell.slurm or {}
        expected = cell.device.split(":")[1] if cell.device.startswith("cuda:") else None
        right = expected is None or (slurm.get("gpus") == expected and cell.status.value == "ok")
        pinned_right &= right
        print(f"{cell.device:8} {cell.status.value:12} task CUDA_VISIBLE_DEVICES="
              f"{slurm.get('gpus')!s:6} worker device: {cell.device_name} "
              f"{'' if right else '<- NOT ITS OWN GPU'} {cell.reason[:120]}")
    print(f"run folder: {result.path}")
    return 0 if pinned_right else 1


if __name__ == "__main__":
    sys.exit(main())
