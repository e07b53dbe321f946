"""The compact summary of `benchmarks/gpu_suite.sh state|ddp` and `energy_check.sh`.

    python3 benchmarks/gpu_summary.py RUNS_DIR HAND_DIR

Reads every run.json under RUNS_DIR and the energy_by_hand.py results (hand-<loop>-<net>-<batch>.json)
under HAND_DIR; prints energy per step (harness vs hand), reduce-overhead vs cuda-graph, the jax
cells' suspicion, GPU state, and the data-parallel lines (efficiency note, device memory).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from harness.core.units import format_bytes, format_joules, format_seconds
from harness.data.records import GpuState
from harness.data.upgrade import as_run_document
from harness.report.views import energy as energy_view
from harness.report.views import scaling

NETS = {"mnist-small": "small", "mnist-wide": "wide"}


def cases(documents: list[dict[str, Any]]):
    """(cell, case) for every case of every run, latest run last."""
    for document in documents:
        for result in document.get("cells") or []:
            for case in result.get("cases") or []:
                yield result.get("cell") or {}, case, result


def step_seconds(case: dict[str, Any]) -> float | None:
    samples = case.get("samples") or []
    if case.get("status") != "ok" or not samples:
        return None
    return statistics.median(samples) / ((case.get("extra") or {}).get("steps_per_call") or 1)


def hand_text(hand: dict[str, Any], harness_j_per_step: float, label: str) -> str:
    diff = harness_j_per_step / hand["j_per_step"] - 1
    return (f"{label} {format_seconds(hand['step_s'])}/step, "
            f"{format_joules(hand['j_per_step'])}/step ({hand['watts_mean']:.0f} W, "
            f"{format_joules(hand['j_per_step_above_idle'])} above {hand['idle_w']:.0f} W idle): "
            f"harness {diff:+.1%} vs {label}")


def pass_pace(device: dict[str, Any]) -> str:
    """The energy window's own time per step, where it is not the timed samples."""
    if not str(device.get("source", "")).startswith("an energy pass") or not device.get("calls"):
        return ""
    steps = device["calls"] * (device.get("steps_per_call") or 1)
    return f"; the pass ran at {format_seconds(device['window_s'] / steps)}/step"


def energy_lines(documents: list[dict[str, Any]], hand_dir: Path) -> list[str]:
    lines = ["## Energy per step: harness (NVML counter over the timed epochs, idle included) "
             "vs an independent hand loop (benchmarks/energy_by_hand.py)"]
    for cell, case, _ in cases(documents):
        net = NETS.get(str(cell.get("workload")))
        if not (net and cell.get("framework") == "torch" and cell.get("variant") == "preloaded"
                and str(cell.get("device", "")).startswith("cuda")):
            continue
        batch = (case.get("case") or {}).get("batch_size")
        device = ((case.get("extra") or {}).get("energy") or {}).get("device") or {}
        where = f"{cell['workload']} batch {batch}"
        if device.get("status") != "ok":
            lines.append(f"- {where}: harness energy {device.get('status')}: "
                         f"{device.get('reason')}")
            continue
        text = (f"- {where}: {format_seconds(step_seconds(case))}/step, harness "
                f"{format_joules(device['joules_per_step'])}/step "
                f"({device['watts_mean']:.0f} W over {device['window_s']:.2g} s; "
                f"{format_joules(device.get('joules_per_step_above_idle'))} above "
                f"{device.get('idle_watts', float('nan')):.0f} W idle; from {device['source']}"
                f"{pass_pace(device)})")
        for loop, label in (("harness", "hand, the harness's loop"), ("own", "hand, own loop")):
            hand_path = hand_dir / f"hand-{loop}-{net}-{batch}.json"
            if hand_path.exists():
                text += "; " + hand_text(json.loads(hand_path.read_text()),
                                         device["joules_per_step"], label)
        lines.append(text)
    lines += [f"- verdict: {line}" for line in
              energy_view.gpu_vs_cpu_sentences(energy_view.energy_table(
                  [as_run_document(document) for document in documents]))]
    return lines


def graph_lines(documents: list[dict[str, Any]]) -> list[str]:
    lines = ["## reduce-overhead (whole step compiled) vs cuda-graph (hand-captured), torch GPU"]
    found: dict[tuple, dict[str, Any]] = {}
    for cell, case, _ in cases(documents):
        if cell.get("framework") != "torch" or not str(cell.get("device", "")).startswith("cuda"):
            continue
        if cell.get("variant") not in ("reduce-overhead", "cuda-graph", "preloaded"):
            continue
        batch = (case.get("case") or {}).get("batch_size")
        variant = cell["variant"]
        found[(cell["workload"], batch, variant)] = case
    for (workload, batch, variant), case in sorted(found.items(), key=str):
        if not variant.startswith("reduce-overhead"):
            continue
        mine = step_seconds(case)
        graph = found.get((workload, batch, "cuda-graph"))
        eager = found.get((workload, batch, "preloaded"))
        graph_s = step_seconds(graph) if graph else None
        text = f"- {workload} batch {batch}: {variant} {format_seconds(mine)}/step"
        if case.get("status") != "ok":
            text += f" ({case.get('status')}: {case.get('reason')})"
        if graph_s:
            text += f", cuda-graph {format_seconds(graph_s)}/step"
            if mine:
                text += f" ({mine / graph_s:.2f}x cuda-graph's time; target <= 2x)"
        if eager and step_seconds(eager):
            text += f", eager preloaded {format_seconds(step_seconds(eager))}/step"
        text += profile_text(case, mine)
        if graph:
            text += f"; cuda-graph:{profile_text(graph, graph_s)}"
        graphs = (case.get("extra") or {}).get("cuda_graphs")
        if graphs:
            text += f"; {energy_view.graphs_text(graphs)}"
        lines.append(text)
    return lines


def profile_text(case: dict[str, Any], step_s: float | None) -> str:
    """', device busy 40%, 3.0 launches and 25 kernels per step' from the busy pass."""
    profile = case.get("device_profile") or {}
    steps = (case.get("extra") or {}).get("steps_per_call") or 1
    parts = []
    if profile.get("busy_seconds") and step_s:
        parts.append(f"device busy {profile['busy_seconds'] / steps / step_s:.0%}")
    for name, key in (("launches", "launches_per_call"), ("kernels", "kernels_per_call")):
        if profile.get(key) is not None:
            parts.append(f"{profile[key] / steps:.1f} {name}/step")
    return (", " + ", ".join(parts)) if parts else ""


def jax_lines(documents: list[dict[str, Any]]) -> list[str]:
    lines = ["## jax / keras-jax GPU cells: suspicion (a shared GPU must not be seen where none is)"]
    for cell, case, _ in cases(documents):
        if cell.get("framework") not in ("jax", "keras-jax"):
            continue
        load = case.get("other_load") or {}
        lines.append(
            f"- {cell['framework']} {cell['device']} {cell['variant']} batch "
            f"{(case.get('case') or {}).get('batch_size')}: {case.get('status')}, "
            f"{format_seconds(step_seconds(case))}/step, other processes "
            f"{load.get('other_cores', float('nan')):.2f} cores, interrupts "
            f"{load.get('interrupt_cores', float('nan')):.2f} over {load.get('seconds', 0):.2g} s;"
            f" SUSPECT: {case.get('suspect') or 'no'}")
    return lines


def state_lines(documents: list[dict[str, Any]]) -> list[str]:
    lines = ["## GPU state (first case of each GPU cell, and every suspect one)"]
    seen = set()
    for cell, case, _ in cases(documents):
        state = (case.get("extra") or {}).get("gpu_state")
        key = (cell.get("workload"), cell.get("framework"), cell.get("variant"))
        if not state or (key in seen and not state.get("suspect")):
            continue
        seen.add(key)
        lines.append(f"- {' '.join(map(str, key))} batch "
                     f"{(case.get('case') or {}).get('batch_size')}: "
                     f"{energy_view.state_text(GpuState.from_dict(state))}")
    return lines


def ddp_lines(documents: list[dict[str, Any]]) -> list[str]:
    ddp = [document for document in documents if document.get("workload") == "mnist-ddp"]
    if not ddp:
        return []
    lines = ["## mnist-ddp: scaling (with the efficiency note) and device memory from the ranks"]
    for document in ddp:
        lines += [f"- {line}" for line in scaling.console_lines(as_run_document(document))]
    for cell, case, _ in cases(ddp):
        memory = (case.get("extra") or {}).get("device_memory") or {}
        per_rank = ", ".join(f"rank {rank.get('rank')} {format_bytes(rank.get('allocated'))}"
                             for rank in memory.get("per_rank") or [])
        lines.append(f"- {cell.get('framework')} {case.get('case')}: device peak allocated "
                     f"{format_bytes(case.get('peak_device_allocated_bytes'))} (max over ranks; "
                     f"sum {format_bytes(memory.get('allocated_sum'))}; {per_rank}), reserved "
                     f"{format_bytes(case.get('peak_device_reserved_bytes'))}; busy share of "
                     f"rank 0: {(case.get('extra') or {}).get('device_busy_share')}")
    return lines


def main(argv: list[str]) -> int:
    runs_dir, hand_dir = Path(argv[0]), Path(argv[1] if len(argv) > 1 else argv[0])
    documents = []
    for path in sorted(runs_dir.rglob("run.json")):
        try:
            documents.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"unreadable {path}: {exc}")
    documents.sort(key=lambda document: str(document.get("started") or ""))
    sections = [energy_lines(documents, hand_dir), graph_lines(documents),
                jax_lines(documents), state_lines(documents), ddp_lines(documents)]
    for section in sections:
        if len(section) > 1:
            print("\n".join(section) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
