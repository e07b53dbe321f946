"""summary.md: the verdicts in words and tables, with the PNGs embedded beside them.

Every number comes from a table of tables.py; this module only phrases it. The reader's question
is "when does the GPU win, why not here, and which framework should I pick?", so each workload
section answers those three before it lists warnings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.report import tables as t
from harness.core.units import format_ratio, format_seconds, format_size


@dataclass
class Experiment:
    """Everything computed for one experiment (a workload with one set of parameters)."""

    name: str
    stem: str
    workload: str
    sweep: str
    unit: str
    call_name: str
    params: dict[str, Any]
    stats: pd.DataFrame
    cells: pd.DataFrame
    headline: pd.DataFrame
    verdicts: pd.DataFrame
    fastest: pd.DataFrame
    variants: pd.DataFrame
    breakdown: pd.DataFrame
    noisy: pd.DataFrame
    failures: pd.DataFrame
    peaks: pd.DataFrame
    flat: pd.DataFrame
    accuracy: pd.DataFrame
    epochs: pd.DataFrame
    figures: dict[str, Path] = field(default_factory=dict)
    hints: dict[str, Any] = field(default_factory=dict)
    ranking: pd.DataFrame = field(default_factory=pd.DataFrame)


def markdown_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return lines + [""]


def render_summary(experiments: list[Experiment], runs: pd.DataFrame, notes: list[str],
                   out_dir: Path) -> str:
    lines = ["# Benchmark report", ""]
    lines += _runs_section(runs)
    lines += _machines_section(runs, experiments)
    lines += _glance_section(experiments)
    if notes:
        lines += ["## Notes on the data", ""] + [f"- {note}" for note in notes] + [""]
    for experiment in experiments:
        lines += _experiment_section(experiment, out_dir, runs)
    return "\n".join(lines).rstrip() + "\n"


def _when(timestamp: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(timestamp)))
    except (TypeError, ValueError, OverflowError):
        return "unknown time"


def _runs_section(runs: pd.DataFrame) -> list[str]:
    lines = [f"Drawn from {len(runs)} stored run(s), re-rendered from their CSV/JSON alone:", ""]
    for _, run in runs.iterrows():
        flags = " (quick)" if run["quick"] else ""
        state = _run_state(run)
        flags += f"; {state}" if state else ""
        lines.append(f"- `{run['run_id']}`: {run['workload']} on {run['machine']}, "
                     f"{_when(run['started'])}{flags}; command `{run['command'] or '-'}`")
    return lines + [""]


def _run_state(run: pd.Series) -> str:
    """Why a run's cells may be incomplete, in words; '' for a run that ran to its end."""
    if run["interrupted"]:
        by = f" by {run['interrupted_by']}" if run.get("interrupted_by") else ""
        return (f"run `{run['run_id']}` was interrupted{by}: the cell it was running is marked "
                "interrupted and the cells after it never ran")
    if not _has_end_time(run.get("finished")):
        return (f"run `{run['run_id']}` did not finish (no end time): its cells may be "
                "incomplete (the harness was killed, or is still running)")
    return ""


def _has_end_time(finished: Any) -> bool:
    """A number; pandas turns a missing end time into NaN when other runs have one."""
    return isinstance(finished, (int, float)) and not pd.isna(finished)


def _machines_section(runs: pd.DataFrame, experiments: list[Experiment]) -> list[str]:
    lines = ["## Machines", ""]
    rows = []
    for machine, group in runs.groupby("machine", sort=False):
        host = group["host"].iloc[0] or {}
        memory = host.get("memory_bytes")
        versions = _versions(experiments, machine)
        rows.append([machine, host.get("cpu_model") or "-", host.get("cores") or "-",
                     f"{memory / 2**30:.0f} GiB" if isinstance(memory, (int, float)) else "-",
                     ", ".join(host.get("gpus") or []) or "none",
                     host.get("python") or "-", versions or "-"])
    lines += markdown_table(["machine", "CPU", "cores", "memory", "GPUs", "python",
                             "framework versions"], rows)
    return lines


def _versions(experiments: list[Experiment], machine: str) -> str:
    found: dict[str, str] = {}
    for experiment in experiments:
        cells = experiment.cells[experiment.cells["machine"] == machine]
        for framework, version in zip(cells["framework"], cells["framework_version"]):
            if version and framework not in found:
                found[framework] = version
    return ", ".join(f"{name} {version}" for name, version in found.items())


# --- at a glance ------------------------------------------------------------------------------

def _glance_section(experiments: list[Experiment]) -> list[str]:
    lines = ["## At a glance", ""]
    for experiment in experiments:
        for sentence in _glance(experiment):
            lines.append(f"- **{experiment.name}**: {sentence}")
    return lines + [""]


def _glance(experiment: Experiment) -> list[str]:
    sentences = []
    best = experiment.verdicts[experiment.verdicts["framework"] == "best"] \
        if not experiment.verdicts.empty else experiment.verdicts
    machines = best.groupby("machine", sort=False) if not best.empty else []
    for machine, group in machines:
        sentences.append(f"on {machine}: " + _machine_gpu_sentence(experiment, group))
    fastest = _headline_fastest(experiment)
    for _, row in fastest.iterrows():
        sentences.append(_fastest_sentence(experiment, row))
    if not sentences:
        sentences.append("no valid measurement")
    return sentences


def _fastest_sentence(experiment: Experiment, row: pd.Series) -> str:
    """The fastest cell at a size, never by the absence of a cell that failed there."""
    size = _size_phrase(experiment, row["size_label"])
    noise = ("too few samples to judge the noise" if not row["judged"] else
             "beyond the noise" if row["significant"] else "within the noise")
    gap = (f", {format_ratio(row['ratio'])} ahead of {row['runner_up']} ({noise})"
           if row["runner_up"] else "")
    variant = (f", variant {row['variant']}" if experiment.stats["variant"].nunique() > 1
               else "")
    excluded = list(row.get("excluded") or [])
    if excluded and not row.get("device_verdict", True):
        sentence = (f"no verdict on {row['machine']}{size}{variant}: "
                    f"{'; '.join(excluded)}; fastest of the cells that passed: {row['best']} "
                    f"({format_seconds(row['best_median_s'])} per {experiment.unit}), which "
                    "says nothing about the device whose cells failed")
    else:
        sentence = (f"fastest on {row['machine']}{size}{variant}: {row['best']} "
                    f"({format_seconds(row['best_median_s'])} per {experiment.unit}){gap}")
        if excluded:
            sentence += f" (not compared: {'; '.join(excluded)})"
    suspect = list(row.get("suspect") or [])
    if suspect:
        sentence += f"; SUSPECT timing: {'; '.join(suspect)}"
    return sentence


def _machine_gpu_sentence(experiment: Experiment, group: pd.DataFrame) -> str:
    if not group["has_gpu"].any():
        return "no GPU cell measured (CPU only)"
    if not group["has_cpu"].any():
        return "no CPU cell measured"
    parts = []
    comparable = group[group["kind"] != "no-overlap"]
    for _, row in comparable.iterrows():
        text = row["verdict"].text(experiment.sweep)
        if pd.notna(row["speedup_at_largest"]):
            where = (f" at {experiment.sweep}="
                     f"{format_size(row['largest_size'], experiment.sweep)}"
                     if row["largest_size"] else "")
            text += f" (GPU/CPU speedup {format_ratio(row['speedup_at_largest'])}{where})"
        label = f"variant {row['variant']}: " if group["variant"].nunique() > 1 else ""
        if row["cpu_is_other_variant"]:
            text += " vs the best CPU cell of any variant"
        parts.append(label + text + _excluded_phrase(row))
    return "; ".join(parts) or "no size measured on both CPU and GPU"


def _excluded_phrase(row: pd.Series) -> str:
    excluded = list(row.get("excluded") or [])
    if not excluded:
        return ""
    return f" (no verdict where a cell failed: {'; '.join(excluded)})"


def _headline_fastest(experiment: Experiment) -> pd.DataFrame:
    """The fastest row at the headline size, per machine and variant."""
    if experiment.fastest.empty:
        return experiment.fastest
    return experiment.fastest.merge(experiment.headline,
                                    on=["experiment", "machine", "variant", "size_label"])


def _size_phrase(experiment: Experiment, size: str) -> str:
    return f" at {experiment.sweep}={format_size(size, experiment.sweep)}" if size else ""


# --- one experiment ---------------------------------------------------------------------------

def _experiment_section(experiment: Experiment, out_dir: Path,
                        runs: pd.DataFrame) -> list[str]:
    lines = [f"## {experiment.name}", ""]
    lines += [f"Parameters: {_params_text(experiment)}. Times are medians per "
              f"{experiment.unit}" + (" (the time of an epoch, or of a timed block of its "
                                      "steps, / its steps)" if experiment.unit == "step" else "")
              + "; the first (cold) call is kept apart.", ""]
    if experiment.cells.empty:
        return lines + [("No cell results are stored for this experiment (the run may have "
                         "been interrupted before any cell finished)."), ""]
    lines += _figure_links(experiment, out_dir)
    lines += _gpu_section(experiment)
    lines += _fastest_section(experiment)
    lines += _framework_verdict_section(experiment)
    lines += _variants_section(experiment)
    lines += _breakdown_section(experiment)
    lines += _ceiling_section(experiment)
    lines += _accuracy_section(experiment)
    lines += _warnings_section(experiment, runs)
    return lines


def _params_text(experiment: Experiment) -> str:
    parts = []
    for name, value in experiment.params.items():
        shown = "x".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        if name == experiment.sweep and isinstance(value, list):
            shown = ", ".join(format_size(v, experiment.sweep) for v in value)
            name = f"{name} (swept)"
        parts.append(f"{name}={shown if shown != '' else '(default)'}")
    return "; ".join(parts) or "none recorded"


FIGURE_CAPTIONS = {
    "overview": "time per cell at the headline size",
    "crossover": "time and throughput vs size",
    "breakdown": "where the time goes (cross-check: variant differences)",
    "ratios": "speedup ratios",
    "epochs": "epoch times and accuracy",
}


def _figure_links(experiment: Experiment, out_dir: Path) -> list[str]:
    lines = []
    for kind, path in experiment.figures.items():
        try:
            link = path.relative_to(out_dir)
        except ValueError:
            link = path
        lines += [f"![{experiment.name}: {FIGURE_CAPTIONS.get(kind, kind)}]({link.as_posix()})",
                  ""]
    return lines


def _gpu_section(experiment: Experiment) -> list[str]:
    verdicts = experiment.verdicts
    if verdicts.empty or not verdicts["has_gpu"].any():
        return ["### GPU vs CPU", "", ("No GPU cell has a valid time in these runs, so there "
                                       "is no GPU/CPU comparison."), ""]
    sweep = experiment.sweep
    rows = []
    for (machine, variant), group in verdicts.groupby(["machine", "variant"], sort=False):
        best_text = None
        for _, row in group.iterrows():
            if not (row["has_gpu"] and row["has_cpu"]) or row["kind"] == "no-overlap":
                continue
            text = row["verdict"].text(sweep)
            if row["framework"] == "best":
                best_text = text
            elif text == best_text:
                continue  # the same answer as the best-vs-best line: no need to repeat it
            who = ("best GPU cell vs best CPU cell" if row["framework"] == "best" else
                   f"{row['framework']} GPU vs {row['framework']} CPU")
            if row["cpu_is_other_variant"]:
                who += " (CPU of the other variants)"
            speedup = format_ratio(row["speedup_at_largest"]) if pd.notna(
                row["speedup_at_largest"]) else "-"
            if speedup != "-" and row["largest_size"]:
                speedup += f" at {format_size(row['largest_size'], sweep)}"
            rows.append([machine, variant, who, text + _excluded_phrase(row), speedup])
    lines = ["### GPU vs CPU", ""]
    if rows:
        lines += markdown_table(["machine", "variant", "compared", "verdict",
                                 f"GPU speedup at the largest {sweep}"], rows)
    lines += _why_lines(experiment)
    return lines + [""]


def _why_lines(experiment: Experiment) -> list[str]:
    lines = []
    sweep = experiment.sweep
    for _, row in experiment.flat.iterrows():
        lines.append(
            f"- Why the GPU loses at small sizes ({row['framework']}, {row['variant']}, "
            f"{row['machine']}): from {sweep}={format_size(row['from_size'], sweep)} to "
            f"{format_size(row['to_size'], sweep)} the work grows {row['work_growth']:,.0f}x "
            f"but the GPU time per {experiment.unit} only {row['time_growth']:.2g}x, ~flat at "
            f"{format_seconds(row['level_s'])}: a fixed per-call cost (kernel launch, "
            "synchronisation, framework dispatch), not compute.")
    lines += _cold_lines(experiment)
    return lines


def _cold_lines(experiment: Experiment) -> list[str]:
    """First-call cost per device kind, from each cell's first (smallest) case."""
    valid = experiment.stats[experiment.stats["valid"] & experiment.stats["cold_call_s"].notna()]
    if valid.empty:
        return []
    first = valid.sort_values(["size_value", "size_label"]).groupby(t.CELL_KEYS,
                                                                    sort=False).head(1)
    call = experiment.call_name
    lines = []
    for (machine, kind), group in first.groupby(["machine", "device_kind"], sort=False):
        worst = group.sort_values("cold_call_s").iloc[-1]
        lines.append(
            f"- Cold start on {machine} ({kind.upper()}): the first {call} of a cell took up to "
            f"{format_seconds(worst['cold_call_s'])} ({worst['framework']} {worst['device']} "
            f"{worst['variant']}) vs {format_seconds(worst['call_median_s'])} for a warm {call}: "
            "one-time setup (context creation, kernel selection, tracing, compilation), "
            "excluded from the medians.")
    return lines


def _fastest_section(experiment: Experiment) -> list[str]:
    fastest = experiment.fastest
    if fastest.empty:
        return []
    several_machines = fastest["machine"].nunique() > 1
    sweep = experiment.sweep or "size"
    headers = (["machine"] if several_machines else []) + [
        sweep, "fastest", f"median per {experiment.unit} (IQR)", "runner-up",
        "runner-up median", "faster by", "beyond noise (IQRs apart)?"]
    machine = "" if several_machines else f" on {fastest['machine'].iloc[0]}"
    lines = []
    for variant, group in fastest.groupby("variant", sort=False):
        rows = []
        for _, row in group.iterrows():
            cells = [format_size(row["size_label"], sweep) if row["size_label"] else "-",
                     row["best"], (f"{format_seconds(row['best_median_s'])} "
                                   f"({format_seconds(row['best_iqr_s'])})"),
                     row["runner_up"] or "-", format_seconds(row["runner_up_median_s"])
                     if row["runner_up"] else "-",
                     format_ratio(row["ratio"]) if row["runner_up"] else "-",
                     _noise_verdict(row) if row["runner_up"] else "-"]
            if row.get("excluded"):
                cells[1] += " (not compared: " + "; ".join(row["excluded"]) + ")"
            rows.append(([row["machine"]] if several_machines else []) + cells)
        lines += [f"### Fastest framework x device, variant {variant}{machine}", ""]
        lines += markdown_table(headers, rows)
    return lines


def _framework_verdict_section(experiment: Experiment) -> list[str]:
    """Every framework ranked on each device, one line per (machine, variant, device)."""
    ranking = experiment.ranking
    if ranking.empty or ranking["framework"].nunique() < 2:
        return []
    several_machines = ranking["machine"].nunique() > 1
    lines = ["### Framework verdict: every framework ranked per device", "",
             ("Fastest first, at the headline size, same variant and device; each gap is "
              "judged against the framework ranked just above (IQRs apart, from "
              f"{t.MIN_SAMPLES_TO_JUDGE} samples each)."), ""]
    for (machine, variant, device), group in ranking.groupby(
            ["machine", "variant", "device"], sort=False):
        where = f"{machine}, " if several_machines else ""
        size = _size_phrase(experiment, group["size_label"].iloc[0])
        entries = [_ranked_entry(row, experiment.unit) for _, row in group.iterrows()]
        lines.append(f"- **{device}**, {where}variant {variant}{size}: " + "; ".join(entries))
    return lines + [""]


def _ranked_entry(row: pd.Series, unit: str) -> str:
    text = f"{row['rank']}. {row['framework']} {format_seconds(row['median_s'])}/{unit}"
    if row["rank"] == 1:
        return text
    if not row["judged"]:
        gap = f"not judged, < {t.MIN_SAMPLES_TO_JUDGE} samples"
    else:
        gap = "beyond noise" if row["significant"] else "within noise"
    return f"{text} ({format_ratio(row['times_best'])} the fastest; {gap} vs #{row['rank'] - 1})"


def _noise_verdict(row: pd.Series) -> str:
    if not row["judged"]:
        return f"not judged (< {t.MIN_SAMPLES_TO_JUDGE} samples)"
    return "yes" if row["significant"] else "no"


def _variants_section(experiment: Experiment) -> list[str]:
    table = experiment.variants
    if table.empty:
        return []
    lines = ["### Variants compared (as written vs the best variant of the same cell)", ""]
    rows = [[row["machine"], f"{row['framework']} {row['device']}", row["variant"],
             format_size(row["size_label"], experiment.sweep) if row["size_label"] else "-",
             format_seconds(row["median_s"]),
             "best" if row["variant"] == row["best_variant"] else
             f"{format_ratio(row['vs_best'])} slower than {row['best_variant']}"]
            for _, row in table.iterrows()]
    return lines + markdown_table(["machine", "cell", "variant", experiment.sweep or "size",
                                   "median", "vs best"], rows)


def _breakdown_section(experiment: Experiment) -> list[str]:
    table = experiment.breakdown
    with_overhead = table[table["overhead_s"] > 0] if not table.empty else table
    if with_overhead.empty:
        return []
    # Differences between variants estimate one cost each; the device-busy pass measures the
    # split directly (section "Where the time goes, measured"), so this is the cross-check.
    lines = ["### Where the time goes (cross-check: differences between variants)", ""]
    for _, row in with_overhead.iterrows():
        lines.append(
            f"- {row['machine']}, {row['framework']} {row['device']} {row['variant']}: "
            f"{row['overhead_share']:.0%} of each {experiment.unit} goes to "
            f"{row['overhead_name']} ({format_seconds(row['overhead_s'])} of "
            f"{format_seconds(row['median_s'])}; measured as the difference to the variant "
            "without them).")
    return lines + [""]


def _accuracy_section(experiment: Experiment) -> list[str]:
    table = experiment.accuracy
    if table.empty:
        return []
    lines = ["### Accuracy and data", ""]
    rows = [[row["machine"], row["variant"], row["framework"], row["device"],
             format_size(row["size_label"], experiment.sweep) if row["size_label"] else "-",
             f"{row['accuracy']:.4f}", row["status"]] for _, row in table.iterrows()]
    lines += markdown_table(["machine", "variant", "framework", "device",
                             experiment.sweep or "size", "test accuracy", "status"], rows)
    sources = sorted({s for s in table["data_source"].dropna() if s})
    distinct = sorted({int(v) for v in table["samples_distinct"].dropna()})
    train = experiment.params.get(experiment.hints.get("epoch_samples_param") or "")
    lines.append(f"- Data source: {', '.join(sources) or 'not recorded'}.")
    if distinct:
        repeated = isinstance(train, int) and max(distinct) < train
        lines.append(f"- Distinct training samples: {', '.join(map(str, distinct))}"
                     + (f" (repeated to {train} per epoch: times are real, accuracy is on a "
                        "small set)" if repeated else "") + ".")
    return lines + [""]


# --- warnings ---------------------------------------------------------------------------------

def _warnings_section(experiment: Experiment, runs: pd.DataFrame) -> list[str]:
    lines = (_incomplete_lines(experiment, runs) + _failure_lines(experiment)
             + _noisy_lines(experiment) + _peak_lines(experiment))
    if not lines:
        return ["### Warnings", "", "None: every cell ran, passed its check and is steady.", ""]
    return ["### Warnings", ""] + lines + [""]


def _incomplete_lines(experiment: Experiment, runs: pd.DataFrame) -> list[str]:
    """One line per run of this experiment that stopped early, naming the cells it saved."""
    lines = []
    for _, run in runs[runs["experiment"] == experiment.name].iterrows():
        state = _run_state(run)
        if not state:
            continue
        saved = ", ".join(run["cells_saved"]) or "none"
        status = "interrupted" if run["interrupted"] else "incomplete"
        lines.append(f"- {status} on {run['machine']}: {state}; cells saved: {saved}")
    return lines


def _failure_lines(experiment: Experiment) -> list[str]:
    """One line per (machine, status, reason), naming every cell it applies to."""
    lines = []
    sweep = experiment.sweep
    failures = experiment.failures.assign(
        reason_text=experiment.failures["reason"].map(lambda r: " ".join(str(r).split())
                                                       or "no reason recorded"))
    for (machine, status, reason), group in failures.groupby(
            ["machine", "status", "reason_text"], sort=False):
        where = ", ".join(
            f"{row['framework']} {row['device']} {row['variant']}"
            + (f" at {sweep}={format_size(row['size_label'], sweep)}" if row["size_label"] else "")
            for _, row in group.iterrows())
        if status == "invalid":
            lines.append(f"- INVALID, failed its correctness check (its time is not shown as a "
                         f"result) on {machine}: {where}: {reason}")
        else:
            lines.append(f"- {status} on {machine}: {where}: {reason}")
    return lines


def _noisy_lines(experiment: Experiment) -> list[str]:
    lines = []
    stats = experiment.stats
    for _, row in stats[stats["valid"] & (stats["suspect"] != "")].iterrows():
        lines.append(f"- SUSPECT timing: {row['machine']}, {row['framework']} {row['device']} "
                     f"{row['variant']}{_size_at(row)}: {row['suspect']}; its time may not be "
                     "what a loop of this call costs on an idle machine.")
    for _, row in experiment.noisy.iterrows():
        sizes = ", ".join(format_size(s, row["sweep"]) for s in row["sizes"] if s) or "-"
        lines.append(f"- noisy (IQR/median > 10%): {row['machine']}, {row['framework']} "
                     f"{row['device']} {row['variant']} at {row['sweep'] or 'size'}={sizes} "
                     f"(worst {row['worst_noise']:.0%}); gaps smaller than the spread there are "
                     "not meaningful.")
    return lines


def _peak_lines(experiment: Experiment) -> list[str]:
    """IMPLAUSIBLE above the physical bound; a note where the run beat the probe (probe low)."""
    peaks = experiment.peaks
    if peaks.empty:
        return []
    lines = []
    for _, row in peaks[peaks["kind"] == "implausible"].iterrows():
        why = ("the data stayed in cache (small sizes), a compiler fused or folded the loop so "
               "the counted bytes never moved, or the timing is wrong; not a memory speed"
               if row["metric"] == "GB/s" else "the timing or the FLOP count is wrong")
        lines.append(f"- IMPLAUSIBLE: {row['machine']}, {row['framework']} {row['device']} "
                     f"{row['variant']}{_size_at(row)} reaches {row['rate']:,.0f} "
                     f"{row['metric']}, above the machine's physical bound "
                     f"({row['bound']:,.0f}; measured probe {row['probe']:,.0f}): {why}.")
    low = peaks[peaks["kind"] == "probe-low"]
    for (machine, device, metric), group in low.groupby(["machine", "device", "metric"],
                                                         sort=False):
        top = group.sort_values("rate").iloc[-1]
        lines.append(f"- The ceiling probe was low on {machine} {device}: it measured "
                     f"{top['probe']:,.0f} {metric}, but {top['framework']} {top['variant']}"
                     f"{_size_at(top)} reached {top['rate']:,.0f} (below the physical bound "
                     f"{top['bound']:,.0f}), so that result is used as the ceiling.")
    return lines


def _size_at(row: pd.Series) -> str:
    return (f" at {row['sweep']}={format_size(row['size_label'], row['sweep'])}"
            if row["size_label"] else "")


def _ceiling_section(experiment: Experiment) -> list[str]:
    """Each cell's best throughput as a share of its machine's measured ceiling."""
    peaks = experiment.peaks
    if peaks.empty:
        return []
    best = peaks.sort_values("fraction").groupby([*t.CELL_KEYS, "metric"], sort=False).tail(1)
    rows = [[row["machine"], f"{row['framework']} {row['device']} {row['variant']}",
             format_size(row["size_label"], row["sweep"]) if row["size_label"] else "-",
             f"{row['rate']:,.1f} {row['metric']}", f"{row['peak']:,.1f}"
             + (" (probe low: the run's best)" if row["peak"] > row["probe"] else ""),
             f"{row['fraction']:.0%}" + (" IMPLAUSIBLE" if row["kind"] == "implausible" else "")]
            for _, row in t.sort_cells(best).iterrows()]
    return ["### Throughput vs the machine's measured ceilings", ""] + markdown_table(
        ["machine", "cell", experiment.sweep or "size", "best rate", "ceiling", "% of ceiling"],
        rows)


# --- the verdicts for the terminal ------------------------------------------------------------

def verdict_lines(experiments: list[Experiment], runs: pd.DataFrame) -> list[str]:
    """summary.md's answer in plain lines, for the end of `harness compare`.

    Per experiment: GPU vs CPU per machine, the fastest cell, the framework ranking per device
    and the warnings, each the very sentence summary.md writes (markdown emphasis dropped).
    """
    lines = []
    for experiment in experiments:
        lines.append(f"{experiment.name}:")
        if experiment.cells.empty:
            lines.append("  no cell results stored (interrupted before any cell finished)")
            continue
        best = experiment.verdicts[experiment.verdicts["framework"] == "best"] \
            if not experiment.verdicts.empty else experiment.verdicts
        for machine, group in (best.groupby("machine", sort=False) if not best.empty else []):
            lines.append(f"  GPU vs CPU on {machine}: "
                         + _machine_gpu_sentence(experiment, group))
        lines += [f"  {_fastest_sentence(experiment, row)}"
                  for _, row in _headline_fastest(experiment).iterrows()]
        lines += [f"  ranking on {_plain(line)}" for line in
                  _framework_verdict_section(experiment) if line.startswith("- ")]
        warnings = [_plain(line) for line in _warnings_section(experiment, runs)
                    if line.startswith("- ")]
        lines += [f"  warning: {line}" for line in warnings] or ["  warnings: none"]
    return lines


def _plain(markdown_bullet: str) -> str:
    """A summary.md bullet as terminal text: no leading '- ', no bold, no code marks."""
    return markdown_bullet.removeprefix("- ").replace("**", "").replace("`", "")
