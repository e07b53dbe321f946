"""The GPU prediction where users look (issue 51, part 4): stored with a run, printed under
its verdict.

After a run, each CPU case whose features pass recorded its step (extra `step_features`,
harness/run/casepasses.py features_pass) is predicted on every shipped profile and every
profile `--predict-for` names, for both hosts ('profiled': the profiled machine drives its
GPU; 'this': this CPU drives it), with the model as it is (harness/predict/model.py). The
predictions are stored as the case's typed `gpu_predictions` ({profile: {host: Prediction}},
harness.data.gpustep), each naming its profile's identity and the CPU cell it was made from,
so `harness check` can recompute them from the run folder (harness/audit/predictions.py).

The line, per profile and predicted CPU cell, for a run with no GPU cell: the framework and
variant it is about, the predicted step (the 'profiled' host: what the validation measured),
its interval (harness/predict/interval.py), how it sets against the measured CPU step of the
SAME cell (framework and variant) at the largest batch, from which batch the GPU would win,
and the regime with what would change it. An MNIST call is an epoch: its features are a few
steps (extra `step_features_steps`), its CPU step the case's median over steps_per_call.
Where several cells were predicted, the terminal prints their ranking per profile instead
(harness/predict/ranking.py); summary.md keeps every cell's line.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.core.units import device_kind, format_size, three_digits
from harness.data.gpustep import PREDICTED, CasePredictions, Prediction
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.data.serial import JsonObject, JsonValue
from harness.predict.interval import Interval, band_for, interval_of, why_no_band
from harness.predict.jaxfeatures import load_features
from harness.predict.jaxmodel import predict_any
from harness.predict.model import LAUNCH_BOUND
from harness.predict.profile import Profile, ProfileError, load_profile, shipped_names
from harness.predict.rates import HostSpeed
from harness.spec import Status

FEATURES_KEY, STEPS_KEY, REASON_KEY, HOST_SPEED_KEY = (
    "step_features", "step_features_steps", "step_features_reason", "host_speed")
HOSTS = ("profiled", "this")
LINE_HOST = "profiled"  # the host the printed line uses: the one the validation measured
FAMILY = "predicted GPU step"  # the audit's family for the printed figures
# Three terminal lines at 100 columns at most once folded under the verdict (commands/predicted.py
# folds it): the longest wording that fits, the figures whole.
LINE_LIMIT = 240


@dataclass(frozen=True)
class Target:
    """A profile to predict: the name stored (a shipped name, or a file's absolute path: what
    load_profile reads back) and the profile."""

    name: str
    profile: Profile


def targets(asked: Sequence[str] = ()) -> list[Target]:
    """Every shipped profile, then each one ASKED names (a shipped name or a file). A bad
    ASKED is ProfileError (a BadInput: one line, exit 2) naming the shipped ones; a shipped
    profile that does not load is left out (that GPU goes unpredicted)."""
    found: dict[str, Target] = {}
    for name in shipped_names():
        try:
            found[name] = Target(name, load_profile(name))
        except ProfileError:
            continue
    for given in asked:
        profile = load_profile(given)
        name = given if "/" not in given and given in shipped_names() else \
            str(Path(given).resolve())
        found.setdefault(name, Target(name, profile))
    return list(found.values())


def check_asked(asked: Sequence[str]) -> None:
    """Raise ProfileError (exit 2, nothing written) for a --predict-for that is no profile."""
    for given in asked:
        load_profile(given)


def host_speed(record: Any, cpu_model: str = "", cores: int = 0) -> HostSpeed | None:
    """This machine's host speed as the features pass stored it (None where it did not),
    with the run's CPU model and cores where the record lacks them (host costs are not
    rescaled between two hosts of one CPU model and core count)."""
    if not isinstance(record, dict) or not record:
        return None
    return HostSpeed.from_record({"cpu_model": cpu_model, "cores": cores, **record})


def case_predictions(extra: JsonObject, chosen: Sequence[Target], cpu_model: str = "",
                     cores: int = 0, cell: CellResult | None = None) -> CasePredictions:
    """{profile name: {host: Prediction}} of one case's stored features, each naming the
    framework and variant of the CPU CELL it was made from."""
    record, speed = extra[FEATURES_KEY], extra.get(HOST_SPEED_KEY)
    if not isinstance(record, dict):
        raise TypeError(f"{FEATURES_KEY} is not a JSON object")
    features = load_features(record)  # torch's, a jitted JAX step's, TensorFlow's stand-in
    this_host = host_speed(speed, cpu_model, cores)
    def of_cell(prediction: Prediction) -> Prediction:
        return replace(prediction, framework=cell.framework, cell_variant=cell.variant) \
            if cell is not None else prediction

    return {target.name: {host: of_cell(predict_any(features, target.profile, host=host,
                                                    this_host=this_host,
                                                    profile_name=target.name))
                          for host in HOSTS}
            for target in chosen}


def cpu_cells(document: RunDocument) -> list[CellResult]:
    return [cell for cell in document.cells if device_kind(cell.device) == "cpu"]


def add_predictions(document: RunDocument, chosen: Sequence[Target]) -> int:
    """Store the predictions of every CPU case with features in DOCUMENT (in place); returns
    how many cases were predicted."""
    predicted = 0
    for cell in cpu_cells(document):
        for case in cell.cases:
            if isinstance(case.extra.get(FEATURES_KEY), dict) and chosen:
                case.gpu_predictions = case_predictions(
                    case.extra, chosen, str(document.host_fact("cpu_model") or ""),
                    int(document.host_fact("cores") or 0), cell)
                predicted += 1
    return predicted


# --- the printed answer --------------------------------------------------------------------------

@dataclass(frozen=True)
class CasePoint:
    """One predicted case: its size, its CPU step measured, its GPU step predicted."""

    size: dict[str, Any]  # the case's parameters
    cpu_step_s: float
    noise: float
    prediction: Prediction
    steps: int
    suspect: bool = False  # the CPU timing the ratio divides was flagged (contended, bimodal)

    @property
    def gpu_step_s(self) -> float | None:
        seconds = self.prediction.seconds
        return seconds / self.steps if seconds is not None else None


def cpu_step_seconds(case: CaseResult) -> float | None:
    """The case's measured CPU step: its median call over the steps in a call."""
    median = case.stats.median
    steps = case.extra.get("steps_per_call") or 1
    return median / float(steps) if median else None


def case_noise(case: CaseResult) -> float:
    """The case's run-to-run spread (round medians), else its IQR / median (one round)."""
    if case.round_spread is not None:
        return float(case.round_spread)
    stats = case.stats
    return float(stats.iqr / stats.median) if stats.median and stats.iqr is not None else 0.0


def size_order(size: Any) -> tuple[int, float, str]:
    """Sweep order: numbers by value, anything else after them by its text."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return (0, float(size), "")
    return (1, 0.0, str(size))


def points_of(cell: CellResult, profile_name: str, sweep: str) -> list[CasePoint]:
    """The cell's predicted cases for PROFILE_NAME (the line's host), in sweep order."""
    found = []
    for case in cell.cases:
        stored = case.gpu_predictions.get(profile_name, {}).get(LINE_HOST)
        cpu_s = cpu_step_seconds(case)
        if stored and cpu_s:
            found.append(CasePoint(size=case.case, cpu_step_s=cpu_s, noise=case_noise(case),
                                   prediction=stored,
                                   steps=int(case.extra.get(STEPS_KEY) or 1),
                                   suspect=bool(case.suspect)))
    return sorted(found, key=lambda point: size_order(point.size.get(sweep)))


WIDE_TEXT = "too wide to help"  # an interval past interval.WIDE_RATIO, said instead of it


def interval_figure(interval: Interval) -> str:
    """The interval as its figure prints it: '1.32-2.37 ms', or WIDE_TEXT where its ends lie
    more than interval.WIDE_RATIO apart (the audit recomputes the same text)."""
    if interval.too_wide:
        return WIDE_TEXT
    return f"{ms(interval.low_s)}-{ms(interval.high_s)} ms"


def cell_label(framework: str, variant: str) -> str:
    """'torch as-written': what a predicted line is about."""
    return f"{framework} {variant}".strip()


@dataclass(frozen=True)
class Answer:
    """The figures of one profile's line for one CPU cell, each also a figure record in
    summary.md."""

    device: str
    created: str
    size_text: str
    point: CasePoint
    interval: Interval | None
    no_interval: str
    win_clause: str
    # The profile's torch and this run's (major.minor) where they differ (version_note)
    versions: tuple[str, str] | None = None
    framework: str = "torch"  # the CPU cell's: the line names it, its CPU step is the cell's
    variant: str = "as-written"

    def text(self) -> str:
        """The line: the longest wording that fits LINE_LIMIT, the figures the same in every
        wording: the regime's advice shortened, then left out, then the torch versions said
        shorter, before anything is cut. It names the framework and variant it is about and
        sets the GPU step against the CPU step of that same cell."""
        prediction = self.point.prediction
        about = cell_label(self.framework, self.variant)
        heads = [f"predicted on {self.device} (profiled {self.created}{note}), {about}"
                 for note in self.version_notes()]
        if self.versions:  # the shortest: the date alone says when it was profiled
            heads.append(f"predicted on {self.device} ({self.created}"
                         f"{self.version_notes()[-1]}), {about}")
        gpu = self.point.gpu_step_s
        if prediction.status != PREDICTED or gpu is None:
            return clipped(f"{heads[0]}: unknown at {self.size_text}: {prediction.reason}")
        ratio = self.point.cpu_step_s / gpu
        than = f"than {self.framework} on this CPU"
        versus = (f"~{three_digits(ratio)}x faster {than}" if ratio >= 1 else
                  f"~{three_digits(1 / ratio)}x slower {than}")
        # The ratio is only as good as the CPU timing it divides: said, shorter if need be.
        flags = [" (its timing SUSPECT)", " (SUSPECT)"] if self.point.suspect else [""]
        launch = prediction.regime == LAUNCH_BOUND
        changes = (("a CUDA graph or a larger batch would change that", "a CUDA graph, a larger "
                    "batch") if launch else ("mixed precision would change that", "mixed "
                                             "precision"))
        for head, flag in itertools.product(heads, flags):
            for band, change in itertools.product(self.band_texts(), (*changes, "")):
                advice = f" ({change})" if change else ""
                line = (f"{head}: ~{ms(gpu)} ms per step ({band}), {versus}{flag} at "
                        f"{self.size_text}; {self.win_clause}; {prediction.regime}{advice}")
                if len(line) <= LINE_LIMIT:
                    return line
        return clipped(line)

    def band_texts(self) -> list[str]:
        """How the interval is said, longest first: the range; or that it is too wide to
        help (and why: this CPU's own spread, or the validation's error); or why there is
        none."""
        if self.interval is None:
            return [self.no_interval, "error unmeasured"]
        if self.interval.too_wide:
            cause = ("this CPU's timing too noisy" if self.interval.widened else
                     "the model's measured error")
            return [f"range {WIDE_TEXT}: {cause}", f"range {WIDE_TEXT}"]
        return [self.interval_text()]

    def version_notes(self) -> list[str]:
        """How the head says the profile's torch is another than this run's, longest first
        ('' where it is the same)."""
        if not self.versions:
            return [""]
        there, here = self.versions
        return [f"; torch {there} there, {here} here", f"; torch {there}, {here} here"]

    def interval_text(self) -> str:
        assert self.interval is not None
        return interval_figure(self.interval)


def short_device(name: str) -> str:
    """'H100 80GB' for 'NVIDIA H100 80GB HBM3': the vendor and the memory or board kind
    left out, so the line keeps its advice within two terminal lines."""
    words = name.removeprefix("NVIDIA ").split()
    while len(words) > 1 and words[-1].upper().startswith(("HBM", "PCIE", "SXM", "NVL")):
        words.pop()
    return " ".join(words)


def ms(seconds: float) -> str:
    return three_digits(seconds * 1e3)


def clipped(text: str) -> str:
    return text if len(text) <= LINE_LIMIT else text[:LINE_LIMIT - 3] + "..."


def win_clause(points: Sequence[CasePoint], sweep: str) -> str:
    """From which batch the GPU would win (the smallest size from which the predicted GPU
    step stays under the measured CPU step), or that it would not, in the sizes measured."""
    wins = [point.gpu_step_s is not None and point.gpu_step_s < point.cpu_step_s
            for point in points]
    first = len(wins)
    while first > 0 and wins[first - 1]:
        first -= 1
    if first == len(wins):
        return "would not win in the sizes measured"
    if first == 0:
        return "it would win at every size measured" if len(wins) > 1 else "it would win there"
    return f"from {size_text(points[first].size.get(sweep), sweep, '~')} it would win"


def size_text(size: Any, sweep: str, about: str = "") -> str:
    """'batch 128' (a batch-size sweep is said 'batch'), 'n ~4,096'."""
    return f"{'batch' if 'batch' in sweep else sweep} {about}{format_size(size, sweep)}"


def point_interval(name: str, point: CasePoint) -> tuple[Interval | None, str]:
    """The printed interval of a predicted POINT on profile NAME (the line's host), or why
    there is none ('' where there is one, or the prediction is unknown)."""
    if point.gpu_step_s is None:
        return None, ""
    identity = str(point.prediction.profile.get("identity"))
    framework = point.prediction.framework
    band = band_for(name, identity, LINE_HOST, point.prediction.regime, framework)
    if band is None:
        return None, why_no_band(name, identity, LINE_HOST, point.prediction.regime, framework)
    return interval_of(point.gpu_step_s, band, point.noise), ""


def answer_of(document: RunDocument, cell: CellResult, name: str) -> Answer | None:
    """The answer for one CPU cell and profile (None where no case was predicted)."""
    points = points_of(cell, name, document.sweep)
    if not points:
        return None
    point = points[-1]  # the largest size: where a GPU has its best chance
    identity = point.prediction.profile
    interval, no_interval = point_interval(name, point)
    return Answer(device=short_device(str(identity.get("device") or name)),
                  created=str(identity.get("created") or "?")[:10],
                  size_text=size_text(point.size.get(document.sweep), document.sweep),
                  point=point, interval=interval, no_interval=no_interval,
                  win_clause=win_clause(points, document.sweep),
                  versions=version_note(identity, cell), framework=cell.framework,
                  variant=cell.variant)


def version_note(identity: dict[str, Any], cell: CellResult) -> tuple[str, str] | None:
    """(the profile's torch, this run's), major.minor, where they differ: predicted anyway,
    said on the line (the dispatch and launch costs the profile measured are its version's);
    None where they are the same or either is unknown, or the cell is not torch's."""
    def minor(version: str) -> str:
        return ".".join(version.split("+")[0].split()[0].split(".")[:2]) if version else ""

    if cell.framework != "torch":  # the profile's torch is the torch cell's to set against
        return None
    profiled = minor(str(identity.get("torch") or ""))
    here = minor(str(cell.framework_version or ""))
    return (profiled, here) if profiled and here and profiled != here else None


def predicted_cells(document: RunDocument) -> list[CellResult]:
    """The CPU cells whose cases carry predictions, the as-written ones first, else in the
    run's order."""
    found = [cell for cell in cpu_cells(document)
             if any(case.gpu_predictions for case in cell.cases)]
    return sorted(found, key=lambda cell: cell.variant != "as-written")


def profile_names(cell: CellResult) -> list[str]:
    names: dict[str, None] = {}
    for case in cell.cases:
        for name in case.gpu_predictions:
            names[name] = None
    return list(names)


def cell_answers(document: RunDocument, cell: CellResult) -> list[tuple[str, Answer]]:
    """(profile name, answer) per profile CELL was predicted on."""
    found = [(name, answer_of(document, cell, name)) for name in profile_names(cell)]
    return [(name, answer) for name, answer in found if answer is not None]


def has_gpu_cell(document: RunDocument) -> bool:
    return any(device_kind(cell.device) == "gpu" for cell in document.cells)


def answers(document: RunDocument) -> list[Answer]:
    """Every predicted CPU cell's answer per profile, for a run with no GPU cell ([] where it
    has one, or no prediction)."""
    if has_gpu_cell(document):
        return []
    return [answer for cell in predicted_cells(document)
            for _name, answer in cell_answers(document, cell)]


def ok_case_at(cell: CellResult, sweep: str, size: Any) -> CaseResult | None:
    """CELL's measured case at SIZE of the sweep (None where it has none that ran)."""
    for case in cell.cases:
        if case.case.get(sweep) == size and case.status == Status.OK and case.samples:
            return case
    return None


def chart_points(document: RunDocument, cell: CellResult,
                 case: CaseResult) -> list[JsonValue]:
    """The predicted GPU steps of one CPU case, as the report's overview chart draws them
    beside its measured bar: per profile, the line's host, per step, with the printed
    interval (NaN ends where there is none or it is too wide to help). [] on a run with a
    GPU cell (its GPU is measured), for a GPU cell, or where nothing was predicted."""
    if device_kind(cell.device) != "cpu" or has_gpu_cell(document):
        return []
    found: list[JsonValue] = []
    for name, by_host in case.gpu_predictions.items():
        stored = by_host.get(LINE_HOST)
        if not stored:
            continue
        point = CasePoint(size=case.case, cpu_step_s=cpu_step_seconds(case) or 0.0,
                          noise=case_noise(case), prediction=stored,
                          steps=int(case.extra.get(STEPS_KEY) or 1))
        if point.gpu_step_s is None:
            continue
        interval, _why = point_interval(name, point)
        shown = interval is not None and not interval.too_wide
        found.append({"profile": name, "device": short_device(str(
                          point.prediction.profile.get("device") or name)),
                      "step_s": point.gpu_step_s,
                      "low_s": interval.low_s if interval and shown else float("nan"),
                      "high_s": interval.high_s if interval and shown else float("nan")})
    return found


# --- summary.md ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PrintedFigure:
    """One figure of a line, as the report's Figure record takes it (harness/report/figure.py;
    the audit's family FAMILY: harness/audit/predictions.py)."""

    name: str
    value: float
    unit: str
    text: str
    subject: dict[str, str]
    family: str = FAMILY  # the ranking line's are ranking.RANKING_FAMILY


def figures_of(document: RunDocument, cell: CellResult, name: str,
               answer: Answer) -> list[PrintedFigure]:
    """The figures one answer's line prints ([] for an unknown prediction)."""
    gpu = answer.point.gpu_step_s
    if answer.point.prediction.status != PREDICTED or gpu is None:
        return []
    subject = {"run": document.run_id, "framework": cell.framework, "device": cell.device,
               "variant": cell.variant, "profile": name,
               "size": str(answer.point.size.get(document.sweep))}
    ratio = answer.point.cpu_step_s / gpu
    found = [PrintedFigure("predicted GPU step", gpu * 1e3, "ms", f"~{ms(gpu)} ms per step",
                           subject),
             PrintedFigure("GPU vs this CPU", ratio, "x",
                           f"~{three_digits(ratio if ratio >= 1 else 1 / ratio)}x", subject)]
    if answer.interval is not None:
        found.append(PrintedFigure("interval", answer.interval.low_s * 1e3, "ms",
                                   answer.interval_text(), subject))
    return found
