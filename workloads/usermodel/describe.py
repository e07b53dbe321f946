"""`harness list --model FILE`: what the harness understood of a model file, in lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core import registry
from harness.workloads.usermodel.plan import Children, model_spec

WHAT_TEXT = {"train": "one training step against {targets}; {training}",
             "inference": "one forward pass (no gradients)",
             "step": "your step(net, *inputs)"}


def call_text(info: dict[str, Any], what: str) -> str:
    """What one timed call is: a Keras file's calls are fit() (or predict) over a block of
    steps unless it asks for train_on_batch; the others run one step per call."""
    if info.get("keras_step") == "fit" and what in ("train", "inference"):
        return ("a block of training steps against {targets}; {training}" if what == "train"
                else "predict() over a block of batches (per batch = call / batches)")
    return WHAT_TEXT[what]


def model_lines(model: Path | str, children: Children) -> list[str]:
    """What the harness understood of MODEL (its inspection a child of CHILDREN's)."""
    spec, info = model_spec(model, children)
    targets = "your targets()" if info["has_targets"] else "fixed random targets of the " \
        "output's shape"
    what = info["default_what"]
    training = info.get("training") or "loss and optimizer: not used by your step()"
    others = [name for name in WHAT_TEXT if name != what and (name != "step" or
                                                               info["has_step"])]
    shapes = ", ".join(f"{tuple(item['shape'])} {item['dtype']}" for item in info["inputs"])
    output = tuple(info["output_shape"]) if info["output_shape"] is not None else "not one array"
    lines = [
        f"{spec.name}: {info['path']}",
        (f"  a {info['family']} model from {info['builder']}, {info['parameters']:,} "
         f"parameters; at batch 2: inputs {shapes} -> output {output}"),
        (f"  one timed call: {call_text(info, what).format(targets=targets, training=training)} "
         f"(--param what={'|'.join(others)} for the other{'s' if len(others) > 1 else ''})"),
        f"  sweep: --sizes sets the batch (default {spec.params['batch'].default})",
        (f"  same answer: one set of weights from --param seed= "
         f"(default {spec.params['seed'].default}), each cell vs the CPU reference "
         + ("within the file's tolerance " + f"{info['tolerance']:g}" if info["tolerance"]
            else "within a bound measured from float32 vs float64")),
        "  frameworks and variants (default: as-written; --variant all for every one):",
    ]
    for framework in spec.frameworks:
        installed, why = registry.framework_installed(framework)
        runs = [variant for variant in spec.variants
                if spec.refusal(variant, framework, "cpu") is None
                or spec.refusal(variant, framework, "cuda:0") is None]
        gpu_only = [variant for variant in runs if spec.refusal(variant, framework, "cpu")]
        note = "" if installed else f"  [not installed: {why}]"
        lines.append(f"    {framework}: {', '.join(runs)}"
                     + (f" ({', '.join(gpu_only)}: GPU only)" if gpu_only else "") + note)
    return lines


def verdict_lines(run_dir: Path) -> list[str]:
    """The summary's "At a glance" sentences of a model run, as "your model: ..." lines."""
    try:
        text = (Path(run_dir) / "summary.md").read_text()
    except OSError:
        return []
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## At a glance"
        elif inside and line.startswith("- **"):
            lines.append("your model: " + line.split("**: ", 1)[-1])
    return lines
