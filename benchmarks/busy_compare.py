"""Print the harness's two clocks beside the hand measurements of busy_reference.py.

    python3 benchmarks/busy_compare.py --reference REFERENCE.json RUN_DIR [RUN_DIR ...]

Reads measurements.csv only (the standard library's csv, no pandas). The targets it checks:
- MNIST at batch 32 on the GPU: the harness's busy share within 10 points of the hand
  torch.profiler figure (compared on `preloaded`, whose data is on the device as by hand);
- the cuda-graph (or reduce-overhead) step at <= 0.35 ms, accuracy like as-written's;
- matmul: device_seconds within 5% of the event-per-call reference without L2 clearing
  (do_bench, which clears the L2 before each call, is shown beside it).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

BUSY_SHARE_POINTS = 10.0
GRAPH_STEP_TARGET_S = 0.35e-3
MATMUL_TOLERANCE = 0.05
HAND_COMPARED_VARIANT = "preloaded"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_cases(run_dirs: list[Path]) -> dict[tuple[str, ...], dict[str, Any]]:
    """One entry per (workload, variant, framework, device, size) with both clocks per call."""
    rows: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for run_dir in run_dirs:
        with open(run_dir / "measurements.csv", newline="") as stream:
            for row in csv.DictReader(stream):
                key = (row["workload"], row["variant"], row["framework"], row["device"],
                       row["size"])
                rows[key].append(row)
    return {key: summarize(group) for key, group in rows.items()}


def summarize(rows: list[dict[str, str]]) -> dict[str, Any]:
    warm = [_number(row["seconds"]) for row in rows if row["phase"] == "warm"]
    warm = [seconds for seconds in warm if seconds is not None]
    first = rows[0]
    steps = _number(first.get("steps_per_call", "")) or 1.0
    return {
        "status": first["status"], "reason": first["reason"], "steps": steps,
        "wall_s": statistics.median(warm) if warm else None,
        "device_s": _number(first.get("device_seconds", "")),
        "copy_s": _number(first.get("device_copy_seconds", "")),
        "kernels": _number(first.get("kernels_per_call", "")),
        "launches": _number(first.get("launches_per_call", "")),
        "span_s": _number(first.get("device_span_seconds", "")),
        "device_reason": first.get("device_reason", ""),
        "check_value": _number(first.get("check_value", "")),
    }


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _per(value: float | None, steps: float) -> float | None:
    return None if value is None else value / steps


def mnist_lines(cases: dict[tuple[str, ...], dict[str, Any]], reference: dict[str, Any]) -> list[str]:
    lines = ["MNIST, GPU cells, per step: harness (wall, busy, share, kernels) vs hand profiler",
             (f"{'workload':12} {'variant':16} {'status':8} {'wall ms':>8} {'busy ms':>8} "
              f"{'busy %':>7} {'kern':>6} {'launch':>6} {'acc':>6} {'hand %':>7} {'diff':>6}")]
    for (workload, variant, framework, device, size), case in sorted(cases.items()):
        if not workload.startswith("mnist") or device == "cpu":
            continue
        steps = case["steps"]
        wall, busy = _per(case["wall_s"], steps), _per(case["device_s"], steps)
        share = 100 * busy / wall if wall and busy is not None else None
        hand = (reference.get("mnist") or {}).get(workload, {})
        hand_share = 100 * hand["busy_share"] if hand and variant == HAND_COMPARED_VARIANT \
            else None
        diff = "" if share is None or hand_share is None else f"{share - hand_share:+.1f}"
        lines.append(
            f"{workload:12} {variant:16} {case['status']:8} {_ms(wall):>8} {_ms(busy):>8} "
            f"{'-' if share is None else f'{share:.0f}':>7} "
            f"{_fmt(_per(case['kernels'], steps)):>6} {_fmt(_per(case['launches'], steps)):>6} "
            f"{_fmt(case['check_value'], 3):>6} "
            f"{'' if hand_share is None else f'{hand_share:.0f}':>7} {diff:>6}")
        if case["status"] != "ok" or case["device_reason"]:
            lines.append(f"    {case['reason'] or case['device_reason']}"[:160])
    for workload, hand in sorted((reference.get("mnist") or {}).items()):
        lines.append(f"hand {workload}: wall {_ms(hand['wall_s'])} ms, busy "
                     f"{_ms(hand['device_s'])} ms ({100 * hand['busy_share']:.0f}%), "
                     f"{hand['kernels']:.0f} device events, CUDA-graph replay "
                     f"{_ms(hand.get('graph_step_s'))} ms")
    return lines + verdict_lines(cases, reference)


def verdict_lines(cases: dict[tuple[str, ...], dict[str, Any]],
                  reference: dict[str, Any]) -> list[str]:
    lines = []
    for workload in ("mnist-small", "mnist-wide"):
        gpu = {key[1]: case for key, case in cases.items()
               if key[0] == workload and key[3] != "cpu" and case["wall_s"]}
        baseline = gpu.get("as-written")
        for variant in ("cuda-graph", "reduce-overhead"):
            case = gpu.get(variant)
            if case is None:
                continue
            step = case["wall_s"] / case["steps"]
            meets = "MEETS" if step <= GRAPH_STEP_TARGET_S else "misses"
            accuracy = "" if baseline is None else (
                f"; accuracy {_fmt(case['check_value'], 3)} vs as-written "
                f"{_fmt(baseline['check_value'], 3)}")
            lines.append(f"{workload} {variant}: {step * 1e3:.3f} ms/step, {meets} the "
                         f"{GRAPH_STEP_TARGET_S * 1e3:.2f} ms target{accuracy}")
        hand = (reference.get("mnist") or {}).get(workload)
        case = gpu.get(HAND_COMPARED_VARIANT)
        if hand and case and case["device_s"] is not None:
            share = 100 * case["device_s"] / case["wall_s"]
            gap = share - 100 * hand["busy_share"]
            verdict = "WITHIN" if abs(gap) <= BUSY_SHARE_POINTS else "OUTSIDE"
            lines.append(f"{workload} {HAND_COMPARED_VARIANT}: busy share {share:.0f}% vs hand "
                         f"{100 * hand['busy_share']:.0f}%: {gap:+.1f} points, {verdict} "
                         f"{BUSY_SHARE_POINTS:.0f}")
    return lines


def matmul_lines(cases: dict[tuple[str, ...], dict[str, Any]],
                 reference: dict[str, Any]) -> list[str]:
    lines = ["", ("matmul fp32 on the GPU: device_seconds vs CUDA events per call (no L2 "
                  "clearing) and do_bench (clears L2)"),
             (f"{'variant':11} {'n':>5} {'wall us':>9} {'busy us':>9} {'events us':>10} "
              f"{'do_bench us':>11} {'busy/events':>11} {'busy/do_bench':>13}")]
    refs = reference.get("matmul") or {}
    for (workload, variant, _, device, size), case in sorted(
            cases.items(), key=lambda item: (item[0][1], _number(item[0][4]) or 0)):
        if workload != "matmul" or device == "cpu":
            continue
        ref = refs.get(size, {})
        busy = case["device_s"]
        events, bench = ref.get("events_no_flush_s"), ref.get("do_bench_s")
        ratio = busy / events if busy and events else None
        mark = "" if ratio is None or variant != "fp32" else (
            " ok" if abs(ratio - 1) <= MATMUL_TOLERANCE else " OUTSIDE 5%")
        lines.append(f"{variant:11} {size:>5} {_us(case['wall_s']):>9} {_us(busy):>9} "
                     f"{_us(events):>10} {_us(bench):>11} {_fmt(ratio, 3):>11} "
                     f"{_fmt(busy / bench if busy and bench else None, 3):>13}{mark}")
    return lines


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.1f}"


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    reference = json.loads(args.reference.read_text()) if args.reference.is_file() else {}
    cases = read_cases([run for run in args.runs if (run / "measurements.csv").is_file()])
    print("\n".join(mnist_lines(cases, reference) + matmul_lines(cases, reference)))


if __name__ == "__main__":
    main()
