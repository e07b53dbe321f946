"""An independent reading of energy per training step: plain torch + pynvml, no harness code.

The same loop as the harness's mnist `preloaded` variant (nn.Sequential MLP, default Adam,
CrossEntropyLoss, the whole training set on the GPU, each batch gathered by index there), so
its joules per step can be held against the harness's extra['energy'] figure. The digits are
the ones the harness trains on (harness.workloads.mnist_data, data only: a GPU's power depends a little
on the values it multiplies), else random pixels where that module is not importable.

    python3 benchmarks/energy_by_hand.py --net small --batch 32 --seconds 6 --out hand.json

Reports the NVML board counter's total over whole epochs (idle included, the figure the
harness reports) and the share above the idle power read first with nothing running.

--loop own (default) is the loop above, written here. --loop harness runs the harness's own
training object (harness.backends.torch.mnist.PreloadedTraining on harness.workloads.mnist's inputs), one
step() per epoch, with this script's clock and NVML reads around it and nothing of the harness's
measurement code: it holds the harness's energy figure against a hand reading of the very
same loop, so a difference is the measurement's, not two loops' (a host-bound step at batch
32 differs by 20% between two hand-written loops of the same model).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import pynvml
import torch
from torch import nn

HIDDEN = {"small": (128,), "wide": (1000, 1000)}
TRAIN_SAMPLES, DROPOUT = 60000, 0.2


def model_for(net: str) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Flatten()]
    width = 28 * 28
    for units in HIDDEN[net]:
        layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(DROPOUT)]
        width = units
    return nn.Sequential(*layers, nn.Linear(width, 10))


def training_data(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, str]:
    """60,000 training digits scaled to [0, 1] on the device, and where they came from."""
    try:
        from harness.workloads.mnist_data import load_mnist, repeat_to  # noqa: PLC0415
    except ImportError:
        return (torch.rand(TRAIN_SAMPLES, 28, 28, device=device),
                torch.randint(0, 10, (TRAIN_SAMPLES,), device=device), "random pixels")
    digits = load_mnist()
    index = repeat_to(TRAIN_SAMPLES, len(digits.y_train), "train")
    images = torch.from_numpy(digits.x_train[index].astype("float32") / 255).to(device)
    labels = torch.from_numpy(digits.y_train[index].astype("int64")).to(device)
    return images, labels, digits.source


def own_epoch(net: str, batch: int, device: torch.device) -> tuple[Callable[[], int], str]:
    """The loop written here (one call = one epoch, returning its steps) and its data's source."""
    torch.manual_seed(0)
    x_train, y_train, data = training_data(device)
    model = model_for(net).to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    loss_sum = torch.zeros((), device=device)

    def epoch() -> int:
        nonlocal loss_sum
        order = torch.randperm(TRAIN_SAMPLES, device=device)
        steps = 0
        for start in range(0, TRAIN_SAMPLES, batch):
            index = order[start:start + batch]
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[index]), y_train[index])
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach() * len(index)
            steps += 1
        return steps

    return epoch, data


def harness_epoch(net: str, batch: int, device: torch.device) -> tuple[Callable[[], int], str]:
    """The harness's preloaded training step (one call = one epoch) and its data's source."""
    from harness.backends.torch.device import open_device  # noqa: PLC0415
    from harness.backends.torch.mnist import make_task  # noqa: PLC0415
    from harness.workloads import mnist  # noqa: PLC0415

    spec = mnist.SMALL if net == "small" else mnist.WIDE
    case = {"batch_size": batch, "epochs": 4, "train_samples": TRAIN_SAMPLES,
            "test_samples": 10000, "data": "", "blocks": 1}
    inputs = spec.make_inputs(case, "preloaded")
    task = make_task(case, "preloaded", open_device(str(device)), inputs)

    def epoch() -> int:
        task.step()
        return task.steps_per_call

    return epoch, str(inputs["data_source"])


def energy_j(handle: object) -> float:
    return pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--net", choices=sorted(HIDDEN), default="small")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--loop", choices=("own", "harness"), default="own")
    args = parser.parse_args()

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(args.device)
    device = torch.device("cuda", args.device)
    make_epoch = harness_epoch if args.loop == "harness" else own_epoch
    epoch, data = make_epoch(args.net, args.batch, device)

    torch.cuda.synchronize(device)
    idle_start, idle_t0 = energy_j(handle), time.perf_counter()
    time.sleep(args.idle_seconds)
    idle_w = (energy_j(handle) - idle_start) / (time.perf_counter() - idle_t0)
    epoch()  # warm-up: allocator, cuBLAS handles, kernels' first launches
    torch.cuda.synchronize(device)
    steps, start_j, t0 = 0, energy_j(handle), time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        steps += epoch()
        torch.cuda.synchronize(device)
    seconds, joules = time.perf_counter() - t0, energy_j(handle) - start_j
    result = {"net": args.net, "batch": args.batch, "steps": steps, "seconds": seconds,
              "step_s": seconds / steps, "joules": joules, "j_per_step": joules / steps,
              "idle_w": idle_w, "watts_mean": joules / seconds,
              "j_per_step_above_idle": (joules - idle_w * seconds) / steps,
              "gpu": pynvml.nvmlDeviceGetName(handle), "torch": torch.__version__,
              "data": data, "loop": args.loop}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"hand ({args.loop} loop) {args.net} batch {args.batch}: {result['step_s'] * 1e3:.3f} ms/step, "
          f"{result['j_per_step'] * 1e3:.2f} mJ/step total ({result['watts_mean']:.0f} W), "
          f"{result['j_per_step_above_idle'] * 1e3:.2f} mJ/step above {idle_w:.0f} W idle")


if __name__ == "__main__":
    main()
