"""Step features recorded on a foreign CPU (one that is not the GPU's host), framework-free.

The validation's rows (benchmarks/predictlab/validation.py) hold, per (model, batch), the GPU step
measured on a lent GPU and the features recorded on that GPU host's own CPU. A user's CPU is
another one: benchmarks/predict_foreign_record.py records the same zoo's features on it, one
process per repeat, and benchmarks/predict_foreign.py predicts the stored GPU steps again
from those features. This module holds the foreign rows file (compact: the features without
their derived totals, host seconds to 4 significant digits, gzipped) and reads it back.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data.gpustep import Prediction
from harness.predict import interval
from harness.predict.features import StepFeatures
from harness.predict.model import predict
from harness.predict.profile import Profile
from harness.predict.rates import HostSpeed
from harness.predict.versus import NOISE_FLOOR

from . import validation
from .validation import BUSY_SPLIT, noise, percentile

FOREIGN_KIND = "harness-predict-foreign-features"
FOREIGN_VERSION = 1
# Derived totals StepFeatures.recomputed() gives back from the ops: not stored.
DERIVED = ("op_count", "kernel_ops", "flops", "bytes", "unknown_ops", "ops_by_kind",
           "ops_by_name", "chain", "host_s_ops", "host_s_per_op", "python_s", "sync_count",
           "user_sync_count", "precision")
DIGITS = 4


class ForeignError(ValueError):
    """A file that is not a foreign-features rows file this harness reads: one line."""


def empty_document() -> dict[str, Any]:
    return {"kind": FOREIGN_KIND, "version": FOREIGN_VERSION, "processes": [], "rows": []}


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def compact_features(record: Mapping[str, Any]) -> dict[str, Any]:
    """A features record without its derived totals, its seconds to DIGITS digits."""
    found = {key: value for key, value in record.items() if key not in DERIVED}
    found["ops"] = [{**op, "host_s": rounded(float(op.get("host_s") or 0.0))}
                    for op in record.get("ops") or []]
    found["pass_host_s"] = [rounded(float(value)) for value in record.get("pass_host_s") or []]
    return found


def features_of(compact: Mapping[str, Any]) -> StepFeatures:
    """The StepFeatures of a compact record, every total derived again."""
    return StepFeatures.from_dict(dict(compact)).recomputed()


# Per process: what differs between two recordings of one (model, batch) on one CPU.
PER_PROCESS = ("process", "cpu_s", "cpu_samples_s", "other_cores", "steal_cores", "seconds")
PER_PROCESS_FEATURES = ("step_s", "pass_host_s")


def packed_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """DOCUMENT (one row per process and cell) with each cell's op list stored once: per
    process only its timings, contention and each op's host seconds (the op lists of one
    cell must match between processes; ForeignError where they do not)."""
    cells: dict[tuple[str, int], dict[str, Any]] = {}
    for row in document["rows"]:
        features = row["features"]
        shared = {key: value for key, value in features.items()
                  if key not in PER_PROCESS_FEATURES}
        shared["ops"] = [{key: value for key, value in op.items() if key != "host_s"}
                         for op in features["ops"]]
        cell = cells.setdefault((row["model"], int(row["batch"])), {
            "model": row["model"], "batch": int(row["batch"]), "features": shared,
            "by_process": []})
        if cell["features"] != shared:
            raise ForeignError(f"{row['model']} b{row['batch']}: process {row['process']} "
                               "recorded another op list than the first")
        cell["by_process"].append({
            **{key: row.get(key) for key in PER_PROCESS},
            **{key: features.get(key) for key in PER_PROCESS_FEATURES},
            "host_s": [op["host_s"] for op in features["ops"]]})
    return {"kind": FOREIGN_KIND, "version": FOREIGN_VERSION, "packed": True,
            "processes": list(document["processes"]), "rows": list(cells.values())}


def expanded_rows(packed: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A packed document's rows, one per process and cell again (packed_document undone)."""
    rows = []
    for cell in packed["rows"]:
        for each in cell["by_process"]:
            features = {**cell["features"],
                        **{key: each.get(key) for key in PER_PROCESS_FEATURES},
                        "ops": [{**op, "host_s": seconds} for op, seconds in
                                zip(cell["features"]["ops"], each["host_s"], strict=True)]}
            rows.append({"model": cell["model"], "batch": cell["batch"],
                         **{key: each.get(key) for key in PER_PROCESS}, "features": features})
    return rows


def read_foreign(path: Path) -> dict[str, Any]:
    """The foreign rows document of PATH (gzipped or not, packed or not), one row per
    process and cell; ForeignError, one line, for anything else."""
    document = validation.read_document(path, FOREIGN_KIND, FOREIGN_VERSION, "foreign-features",
                                        ForeignError)
    if document.get("packed"):
        return {**document, "packed": False, "rows": expanded_rows(document)}
    return document


# --- the stored GPU steps predicted again from foreign features ------------------------------

# The zoo's models by family (benchmarks/predict_zoo.py): the tables split by it.
FAMILIES = {"mnist-small": "MLP", "mnist-wide": "MLP", "torch_classifier": "MLP",
            "small_cnn": "CNN", "resnet18": "CNN", "mobilenet_v3_small": "CNN",
            "vit_tiny": "transformer", "gpt2_tiny": "transformer", "bert_tiny": "transformer",
            "attention_block": "transformer", "lstm_tagger": "recurrent",
            "gru_net": "recurrent"}
GPU_HOST, FOREIGN = "GPU host", "foreign"


def family_of(model: str) -> str:
    return FAMILIES.get(model, "other")


@dataclass(frozen=True)
class SourcedCell:
    """One stored GPU step predicted from the features of one source CPU: the GPU host's
    own (the row's features) or a foreign CPU's (one process's recording)."""

    lending: str  # the rows file's name
    gpu: str  # its device description
    source: str  # GPU_HOST or FOREIGN
    process: int  # the foreign recording's process (0: the GPU host's features)
    model: str
    batch: int
    gpu_s: float
    gpu_noise: float
    busy_share: float | None
    cpu_s: float  # the source CPU's measured step
    cpu_noise: float
    predicted_s: float
    model_regime: str
    low_s: float | None  # the printed interval (None: no band for it)
    high_s: float | None
    other_cores: float | None = None  # contention while the source recorded

    @property
    def family(self) -> str:
        return family_of(self.model)

    @property
    def error(self) -> float:
        return (self.predicted_s - self.gpu_s) / self.gpu_s

    @property
    def regime(self) -> str:
        """The measured regime (busy share) where known, else the model's."""
        if self.busy_share is None:
            return self.model_regime
        return "host-bound" if self.busy_share < BUSY_SPLIT else "compute-bound"

    @property
    def covered(self) -> bool | None:
        if self.low_s is None or self.high_s is None:
            return None
        return self.low_s <= self.gpu_s <= self.high_s

    @property
    def tie(self) -> bool:
        gap = abs(self.cpu_s - self.gpu_s) / min(self.cpu_s, self.gpu_s)
        return gap <= max(NOISE_FLOOR, self.cpu_noise + self.gpu_noise)

    @property
    def verdict_right(self) -> bool:
        return (self.predicted_s < self.cpu_s) == (self.gpu_s < self.cpu_s)


def foreign_speed(document: Mapping[str, Any], process: int) -> HostSpeed:
    """The foreign CPU's host speed in PROCESS: each loop's median over its passes."""
    found = next(item for item in document["processes"] if item["process"] == process)
    speeds = found["speeds"]
    return HostSpeed(python_loop_s=statistics.median(item["python_loop_s"] for item in speeds),
                     numpy_loop_s=statistics.median(item["numpy_loop_s"] for item in speeds),
                     cpu_model=str(found.get("host_cpu") or ""),
                     cores=int(found.get("cores") or 0))


def printed_interval(made: Prediction, cpu_noise: float) -> tuple[float | None, float | None]:
    """The interval the answer line prints beside MADE (interval.py), None where no band."""
    identity = str(made.profile.get("identity") or "")
    band = interval.band_for(str(made.profile.get("name") or ""), identity, made.host_choice,
                             made.regime)
    if band is None or made.seconds is None:
        return None, None
    found = interval.interval_of(made.seconds, band, cpu_noise)
    return found.low_s, found.high_s


@dataclass(frozen=True)
class Lending:
    """One stored rows file of GPU steps: its name, meta, rows and the profile it names."""

    name: str
    meta: dict[str, Any]
    rows: list[dict[str, Any]]
    profile: str


def sourced_cell(lending: Lending, row: Mapping[str, Any], made: Prediction, *,
                 source: str, process: int, cpu: Mapping[str, Any]) -> SourcedCell | None:
    """ROW's measured GPU step against MADE, predicted from SOURCE's features; CPU: the
    source's measured CPU step ({median_s, samples_s, other_cores})."""
    gpu = row.get("gpu") or {}
    if made.status != "predicted" or made.seconds is None or not gpu.get("median_s"):
        return None
    cpu_noise = noise(cpu.get("samples_s") or [])
    low, high = printed_interval(made, cpu_noise)
    return SourcedCell(
        lending=lending.name, gpu=str(lending.meta.get("device_description") or "?"),
        source=source, process=process, model=str(row["model"]), batch=int(row["batch"]),
        gpu_s=float(gpu["median_s"]), gpu_noise=noise(gpu.get("samples_s") or []),
        busy_share=gpu.get("busy_share"), cpu_s=float(cpu["median_s"]), cpu_noise=cpu_noise,
        predicted_s=made.seconds, model_regime=made.regime, low_s=low, high_s=high,
        other_cores=cpu.get("other_cores"))


def gpu_host_cells(lending: Lending, profiles: Mapping[str, Profile]) -> list[SourcedCell]:
    """LENDING's GPU steps predicted from its own host's features (the model as it is now,
    host 'profiled', with the host speed the run recorded)."""
    record = lending.meta.get("this_host")
    speed = HostSpeed.from_record({"cpu_model": str(lending.meta.get("host_cpu") or ""),
                                   **record}) if record else None
    found = []
    for row in lending.rows:
        if row.get("status") != "ok" or not row.get("features_packed"):
            continue
        made = predict(validation.unpacked(row["features_packed"]), profiles[lending.profile],
                       host="profiled", this_host=speed, profile_name=lending.profile)
        cell = sourced_cell(lending, row, made, source=GPU_HOST, process=0, cpu=row["cpu"])
        if cell is not None:
            found.append(cell)
    return found


def foreign_cells(lending: Lending, document: Mapping[str, Any],
                  profiles: Mapping[str, Profile]) -> list[SourcedCell]:
    """LENDING's GPU steps predicted from each foreign process's features of the same
    (model, batch), host 'profiled' with the foreign CPU's measured speed."""
    by_cell: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for item in document["rows"]:
        by_cell.setdefault((item["model"], int(item["batch"])), []).append(item)
    found = []
    for row in lending.rows:
        for item in by_cell.get((str(row.get("model")), int(row.get("batch") or 0)), []):
            if row.get("status") != "ok":
                continue
            made = predict(features_of(item["features"]), profiles[lending.profile],
                           host="profiled", this_host=foreign_speed(document, item["process"]),
                           profile_name=lending.profile)
            cpu = {"median_s": item["cpu_s"], "samples_s": item.get("cpu_samples_s") or [],
                   "other_cores": item.get("other_cores")}
            cell = sourced_cell(lending, row, made, source=FOREIGN,
                                process=int(item["process"]), cpu=cpu)
            if cell is not None:
                found.append(cell)
    return found


# --- the tables ------------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupStats:
    """The errors of one group of cells (the issue's four figures)."""

    cells: int
    median: float
    p90: float
    covered: int
    with_interval: int
    right: int
    judged: int
    ties: int

    @classmethod
    def of(cls, cells: Sequence[SourcedCell]) -> GroupStats:
        errors = [abs(cell.error) for cell in cells]
        banded = [cell for cell in cells if cell.covered is not None]
        judged = [cell for cell in cells if not cell.tie]
        return cls(cells=len(cells), median=percentile(errors, 0.5),
                   p90=percentile(errors, 0.9), covered=sum(bool(cell.covered) for cell in banded),
                   with_interval=len(banded), right=sum(cell.verdict_right for cell in judged),
                   judged=len(judged), ties=len(cells) - len(judged))

    def columns(self) -> list[str]:
        share = self.covered / self.with_interval if self.with_interval else 0.0
        covered = (f"{self.covered} of {self.with_interval} ({share:.0%})"
                   if self.with_interval else "no band")
        verdict = (f"{self.right} of {self.judged} ({self.right / self.judged:.0%})"
                   if self.judged else "-")
        return [str(self.cells), f"{self.median:.0%}", f"{self.p90:.0%}", covered, verdict]


TABLE_HEADER = ["source CPU", "GPU", "split", "group", "cells", "median abs. error", "p90",
                "interval covers", "verdict right (non-tie)"]
Split = tuple[str, Callable[[SourcedCell], str]]
SPLITS: tuple[Split, ...] = (("all", lambda cell: "all"),
                             ("regime", lambda cell: cell.regime),
                             ("family", lambda cell: cell.family),
                             ("process", lambda cell: f"process {cell.process}"))


def gpu_kind(description: str) -> str:
    return "H100" if "H100" in description else "H200" if "H200" in description else description


def table_rows(cells: Iterable[SourcedCell]) -> list[list[str]]:
    """The by-source table: per source CPU, GPU (and both), split and group, GroupStats."""
    found = list(cells)
    rows = []
    for source in sorted({cell.source for cell in found}, key=lambda name: name != GPU_HOST):
        mine = [cell for cell in found if cell.source == source]
        for gpu in ["both", *sorted({gpu_kind(cell.gpu) for cell in mine})]:
            chosen = [cell for cell in mine if gpu in ("both", gpu_kind(cell.gpu))]
            for split, key in SPLITS:
                if (split != "all" and gpu != "both") or (split == "process"
                                                          and source == GPU_HOST):
                    continue
                groups: dict[str, list[SourcedCell]] = {}
                for cell in chosen:
                    groups.setdefault(key(cell), []).append(cell)
                for group in sorted(groups):
                    rows.append([source, gpu, split, group,
                                 *GroupStats.of(groups[group]).columns()])
    return rows


def markdown(rows: Sequence[Sequence[str]], header: Sequence[str] = TABLE_HEADER) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows)]


# --- files -----------------------------------------------------------------------------------

def stored_gpu_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("predict-validation-*.json.gz"))


def stored_foreign_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("predict-foreign-*.json.gz"))


def lending_of(path: Path) -> Lending:
    meta, rows = validation.read_rows(path)
    name = Path(path).name.removeprefix("predict-validation-").split(".")[0]
    # Predicted again with the profile as shipped now, its name's band with it.
    return Lending(name, meta, rows, validation.shipped_name(
        validation.primary_profile(meta, rows), rows))


def all_cells(gpu_files: Sequence[Path], foreign_files: Sequence[Path]) -> list[SourcedCell]:
    """Every stored GPU step predicted from its GPU host's features, and from each foreign
    file's features of the same (model, batch): the cells the tables count. A foreign file's
    GPU host cells are those of the (model, batch) it recorded, so the two sources are set
    side by side on the same GPU steps."""
    lendings = [lending_of(path) for path in gpu_files]
    profiles = validation.profiles_named(lendings[0].profile if lendings else "h200")
    documents = [read_foreign(path) for path in foreign_files]
    recorded = {(item["model"], int(item["batch"])) for document in documents
                for item in document["rows"]}
    cells: list[SourcedCell] = []
    for lending in lendings:
        cells += [cell for cell in gpu_host_cells(lending, profiles)
                  if (cell.model, cell.batch) in recorded]
        for document in documents:
            cells += foreign_cells(lending, document, profiles)
    return cells


def cell_line(cell: SourcedCell) -> str:
    band = ("-" if cell.low_s is None or cell.high_s is None
            else f"{cell.low_s * 1e3:.2f}-{cell.high_s * 1e3:.2f}")
    return (f"{cell.lending:<10} {cell.source:<8} p{cell.process} {cell.model:<18} "
            f"b{cell.batch:<5} predicted {cell.predicted_s * 1e3:8.2f} ms ({band}) measured "
            f"{cell.gpu_s * 1e3:8.2f} ms {cell.error:+5.0%} {cell.regime:<13} cpu "
            f"{cell.cpu_s * 1e3:8.2f} ms")


# --- the demo's MNIST step (mnist-wide, batch 32, torch) from a foreign CPU ------------------

DEMO_KIND = "harness-predict-foreign-demo"


@dataclass(frozen=True)
class DemoCell:
    """The demo's torch step predicted from one foreign run's features on one profile,
    against the GPU steps measured on that GPU (per step)."""

    process: int
    profile: str
    predicted_s: float
    band: tuple[float, float] | None  # the validated band alone (per step)
    printed: tuple[float, float] | None  # widened to the CPU case's own spread, as printed
    measured_s: tuple[float, ...]
    cpu_s: float
    noise: float

    def inside(self, bounds: tuple[float, float] | None) -> str:
        if bounds is None:
            return "no band"
        held = sum(bounds[0] <= measured <= bounds[1] for measured in self.measured_s)
        return (f"{bounds[0] * 1e3:.2f}-{bounds[1] * 1e3:.2f}: {held} of "
                f"{len(self.measured_s)}")

    def row(self) -> list[str]:
        ratios = [self.predicted_s / measured for measured in self.measured_s]
        return [f"process {self.process}", self.profile,
                f"{self.cpu_s * 1e3:.2f} ({self.noise:.0%})", f"{self.predicted_s * 1e3:.2f}",
                ", ".join(f"{measured * 1e3:.2f}" for measured in self.measured_s),
                f"{min(ratios):.2f}-{max(ratios):.2f}", self.inside(self.band),
                self.inside(self.printed)]


DEMO_HEADER = ["run", "GPU", "CPU step here, ms (spread)", "predicted, ms",
               "measured there, ms", "predicted / measured", "band alone: holds",
               "interval as printed: holds"]


def per_step(bounds: tuple[float | None, float | None], steps: int
             ) -> tuple[float, float] | None:
    low, high = bounds
    return None if low is None or high is None else (low / steps, high / steps)


def demo_cells(document: Mapping[str, Any],
               profiles: Mapping[str, Profile]) -> list[DemoCell]:
    """Every stored demo run's features predicted per step on each profile the document
    has measured steps for (host 'profiled', the printed interval with the case's noise)."""
    found = []
    for run in document["runs"]:
        features = features_of(run["features"])
        for name, measured in sorted(document["measured"].items()):
            made = predict(features, profiles[name], host="profiled", profile_name=name)
            if made.seconds is None:
                continue
            steps, noise = int(run["steps"]), float(run["noise"])
            found.append(DemoCell(
                process=int(run["process"]), profile=name, predicted_s=made.seconds / steps,
                band=per_step(printed_interval(made, 0.0), steps),
                printed=per_step(printed_interval(made, noise), steps),
                measured_s=tuple(float(value) for value in measured["steps_s"]),
                cpu_s=float(run["cpu_step_s"]), noise=noise))
    return found
