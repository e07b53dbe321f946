"""The answer a framework chooser needs (issue 61, part 3): a CPU-only run's predicted GPU
steps ranked per profile, and why the cells left out have no prediction (issue 64).

One line per profile, over every CPU cell whose cases carry a prediction on it (whatever its
framework: the cells' stored records are the only input, so a framework that gains features
ranks here with no change): the predicted step per step of each at one size (the largest
every such cell predicted), fastest first, whether the fastest there is this CPU's fastest
cell at that size (measured, over every CPU cell of the ranked variants, predicted or not),
and the cells with no prediction listed as unknown with a short reason:

    on H100 80GB (profiled 2026-11-27), predicted at batch 32, as-written: jax ~0.5 ms <
      keras-jax ~1.1 ms < torch ~2 ms < keras-torch ~8 ms per step; the fastest there (jax) is
      not this CPU's (keras-jax); unknown: keras-tensorflow (no TensorFlow profile)

No figure here is set against a CPU: each cell's own GPU-vs-CPU line (harness/predict/
answer.py) sets its GPU step against its own CPU step. Every figure carries a record of
family RANKING_FAMILY, recomputed by `harness check` (harness/audit/predictions.py).

The run's one line of why (`not_predicted_line`): each CPU cell with no prediction, grouped by
reason. TensorFlow and keras-tensorflow: "unknown: no TensorFlow profile", with what is
missing: `harness profile-device` measures its rows through torch only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.data.gpustep import PREDICTED
from harness.data.noprofile import TENSORFLOW_FRAMEWORKS
from harness.data.results import CellResult, RunDocument
from harness.predict.answer import (
    REASON_KEY,
    CasePoint,
    PrintedFigure,
    answers,
    cell_answers,
    cell_label,
    cpu_cells,
    cpu_step_seconds,
    figures_of,
    has_gpu_cell,
    ms,
    ok_case_at,
    point_interval,
    points_of,
    predicted_cells,
    short_device,
    size_order,
    size_text,
)
from harness.predict.profile import NO_JAX_ROW

RANKING_FAMILY = "predicted GPU ranking"  # the audit's family (harness/audit/predictions.py)
RANKED, FASTEST_CPU = "ranked GPU step", "fastest on this CPU"  # the figures' names
NO_TF_PROFILE = "no TensorFlow profile"
# What is missing, said once per run: the profile's rows are measured through torch.
TF_MISSING = ("unknown: no TensorFlow profile (harness profile-device measures through torch "
              "only: docs/predict.md)")
NO_FEATURES = "no step features"
RANKING_LIMIT = 300  # three terminal lines at 100 columns: the reasons give way first


@dataclass(frozen=True)
class Ranked:
    """One CPU cell on one profile at the ranking's size: its predicted step, or why none."""

    cell: CellResult
    label: str  # what the line calls it: its framework, with its variant where they differ
    point: CasePoint | None
    why: str = ""  # the short reason where there is no predicted step

    @property
    def step_s(self) -> float | None:
        if self.point is None or self.point.prediction.status != PREDICTED:
            return None
        return self.point.gpu_step_s


@dataclass(frozen=True)
class Ranking:
    """One profile's line: the predicted cells fastest first, the unknown ones, this CPU's
    fastest cell at the same size."""

    run_id: str
    profile: str
    device: str
    created: str
    sweep: str
    size: Any
    variant: str  # the one variant of every cell ('' where they differ: each label says it)
    ranked: tuple[Ranked, ...]
    unknown: tuple[Ranked, ...]
    cpu_fastest: str  # the label of this CPU's fastest cell at SIZE ('' where none ran)

    def entry_text(self, entry: Ranked) -> str:
        return f"{entry.label} ~{ms(entry.step_s or 0.0)} ms"

    def entry_shown(self, entry: Ranked) -> str:
        """The entry as the line prints it: a step whose error no validation measured
        (another framework's, a profile or regime without a band) is starred, and the line
        says what the star means, so its figure is not read as validated as torch's."""
        unmeasured = entry.point is not None and point_interval(self.profile,
                                                                entry.point)[0] is None
        return self.entry_text(entry) + ("*" if unmeasured else "")

    def text(self) -> str:
        """The line (module docstring); the unknown cells' reasons give way before any
        figure would be cut."""
        variant = f", {self.variant}" if self.variant else ""
        head = (f"on {self.device} (profiled {self.created}), predicted at "
                f"{size_text(self.size, self.sweep)}{variant}: ")
        shown = [self.entry_shown(entry) for entry in self.ranked]
        starred = " (*: error not measured)" if any(text.endswith("*") for text in shown) else ""
        body = (" < ".join(shown) + " per step" + starred if self.ranked
                else "no step predicted")
        lines = [f"{head}{body}{self.fastest_clause()}{unknown}"
                 for unknown in unknown_clauses(self.unknown)]
        return next((line for line in lines if len(line) <= RANKING_LIMIT), lines[-1])

    def fastest_clause(self) -> str:
        labels = [entry.label for entry in self.ranked]
        if not self.cpu_fastest or not labels:
            return ""
        if self.cpu_fastest == labels[0]:
            return f"; {labels[0]} fastest there and on this CPU"
        if self.cpu_fastest in labels:
            return f"; the fastest there ({labels[0]}) is not this CPU's ({self.cpu_fastest})"
        return f"; this CPU's fastest ({self.cpu_fastest}) has no prediction"

    def figures(self) -> list[PrintedFigure]:
        """The line's figures: each ranked step with its place, and this CPU's fastest."""
        variants = ",".join(sorted({entry.cell.variant for entry in
                                    (*self.ranked, *self.unknown)}))
        found = [PrintedFigure(RANKED, (entry.step_s or 0.0) * 1e3, "ms", self.entry_text(entry),
                               {"run": self.run_id, "framework": entry.cell.framework,
                                "device": entry.cell.device, "variant": entry.cell.variant,
                                "profile": self.profile, "size": str(self.size),
                                "label": entry.label, "rank": str(rank)}, RANKING_FAMILY)
                 for rank, entry in enumerate(self.ranked)]
        if self.cpu_fastest and self.ranked:
            found.append(PrintedFigure(FASTEST_CPU, 0.0, "", self.cpu_fastest,
                                       {"run": self.run_id, "profile": self.profile,
                                        "size": str(self.size), "variants": variants,
                                        "labelled": "variant" if not self.variant else ""},
                                       RANKING_FAMILY))
        return found


def unknown_clauses(unknown: Sequence[Ranked]) -> list[str]:
    """'; unknown: keras-tensorflow (no TensorFlow profile); jax (no step features)', then
    shorter: the labels alone, then nothing ('' where none is unknown)."""
    if not unknown:
        return [""]
    by_why: dict[str, list[str]] = {}
    for entry in unknown:
        by_why.setdefault(entry.why, []).append(entry.label)
    with_why = "; ".join(f"{', '.join(labels)} ({why})" for why, labels in by_why.items())
    return [f"; unknown: {with_why}",
            f"; unknown: {', '.join(entry.label for entry in unknown)}", ""]


def short_why(cell: CellResult, point: CasePoint | None, at: str, predicted: bool) -> str:
    """Why CELL has no predicted step at the ranking's size, in a few words (PREDICTED:
    whether any of its cases carries a prediction)."""
    if cell.framework in TENSORFLOW_FRAMEWORKS:
        return NO_TF_PROFILE
    if point is None:
        return f"not predicted at {at}" if predicted else NO_FEATURES
    if point.prediction.reason == NO_JAX_ROW:
        return "no JAX row in this profile: harness profile-device --add-jax"
    return "unknown to the model"


def labeller(cells: Sequence[CellResult]) -> tuple[str, Any]:
    """(the cells' one variant, or ''; a cell's label): the framework alone where every
    cell is of one variant, else the framework and variant."""
    variants = {cell.variant for cell in cells}
    if len(variants) == 1:
        return next(iter(variants)), lambda cell: cell.framework
    return "", lambda cell: cell_label(cell.framework, cell.variant)


def ranking_size(document: RunDocument, cells: Sequence[CellResult], profile: str) -> Any:
    """The largest size every cell predicted on PROFILE (else the largest any did)."""
    sizes = [{point.size.get(document.sweep) for point in points_of(cell, profile,
                                                                      document.sweep)}
             for cell in cells]
    common = set.intersection(*sizes) if sizes else set()
    chosen = common or set().union(*sizes)
    return max(chosen, key=size_order) if chosen else None


def measured_cells(document: RunDocument) -> list[CellResult]:
    """The run's CPU cells with at least one case that ran."""
    return [cell for cell in cpu_cells(document)
            if any(ok_case_at(cell, document.sweep, case.case.get(document.sweep))
                   for case in cell.cases)]


def ranking_of(document: RunDocument, profile: str) -> Ranking | None:
    """PROFILE's ranking of DOCUMENT's CPU cells (None where none was predicted on it)."""
    predicted = [cell for cell in predicted_cells(document) if profile in
                 {name for case in cell.cases for name in case.gpu_predictions}]
    size = ranking_size(document, predicted, profile)
    if size is None:
        return None
    ids = {id(cell) for cell in predicted}
    others = [cell for cell in measured_cells(document) if id(cell) not in ids]
    variant, label = labeller([*predicted, *others])
    at = size_text(size, document.sweep)
    entries = []
    for cell in [*predicted, *others]:
        point = next((found for found in points_of(cell, profile, document.sweep)
                      if found.size.get(document.sweep) == size), None)
        entries.append(Ranked(cell, label(cell), point,
                              short_why(cell, point, at, id(cell) in ids)))
    ranked = sorted((entry for entry in entries if entry.step_s is not None),
                    key=lambda entry: entry.step_s or 0.0)
    identity = next(entry.point.prediction.profile for entry in entries if entry.point)
    return Ranking(document.run_id, profile, short_device(str(identity.get("device") or profile)),
                   str(identity.get("created") or "?")[:10], document.sweep, size, variant,
                   tuple(ranked), tuple(entry for entry in entries if entry.step_s is None),
                   cpu_fastest(document, [*predicted, *others], size, label))


def cpu_fastest(document: RunDocument, cells: Sequence[CellResult], size: Any,
                label: Any) -> str:
    """The label of the cell whose measured CPU step at SIZE is the shortest ('' where none
    ran there)."""
    steps = []
    for cell in cells:
        case = ok_case_at(cell, document.sweep, size)
        step = cpu_step_seconds(case) if case is not None else None
        if step:
            steps.append((step, label(cell)))
    return min(steps)[1] if steps else ""


def rankings(document: RunDocument) -> list[Ranking]:
    """One ranking per profile where a CPU-only run predicted several cells ([] otherwise)."""
    cells = predicted_cells(document)
    if has_gpu_cell(document) or len(cells) < 2:
        return []
    names = dict.fromkeys(name for cell in cells for case in cell.cases
                          for name in case.gpu_predictions)
    found = [ranking_of(document, name) for name in names]
    return [ranking for ranking in found if ranking is not None]


def ranking_lines(document: RunDocument) -> list[str]:
    return [ranking.text() for ranking in rankings(document)]


def ranking_entries(document: RunDocument) -> list[tuple[str, list[PrintedFigure]]]:
    """summary.md's ranking lines with their figures."""
    return [(ranking.text(), ranking.figures()) for ranking in rankings(document)]


# --- why not --------------------------------------------------------------------------------

def why_not(cell: CellResult) -> str:
    """Why a CPU cell has no prediction: TensorFlow's missing profile, else the reason its
    features pass stored (said once for all the frameworks it names), else that none was
    recorded."""
    if cell.framework in TENSORFLOW_FRAMEWORKS:
        return TF_MISSING
    for case in cell.cases:
        reason = case.extra.get(REASON_KEY)
        if reason:
            return str(reason).removesuffix(f", not {cell.framework}")
    return "no step features recorded"


def not_predicted_line(document: RunDocument) -> str:
    """The run's one line on its CPU cells without a prediction, grouped by reason ('' where
    every cell that ran has one, or the run measured a GPU)."""
    if has_gpu_cell(document):
        return ""
    predicted = {id(cell) for cell in predicted_cells(document)}
    cells = measured_cells(document)
    _variant, label = labeller(cells)
    by_why: dict[str, list[str]] = {}
    for cell in cells:
        if id(cell) not in predicted:
            by_why.setdefault(why_not(cell), []).append(label(cell))
    if not by_why:
        return ""
    return "GPU step not predicted: " + "; ".join(f"{', '.join(labels)}: {why}"
                                                  for why, labels in by_why.items())


# --- what the terminal and summary.md print of a CPU-only run (one cell's lines, or the ranking)

def answer_lines(document: RunDocument) -> list[str]:
    """The terminal's lines: each cell's line per profile where one cell was predicted; the
    ranking of the predicted cells per profile where several were (harness/predict/ranking.py;
    summary.md keeps every cell's line)."""
    if len(predicted_cells(document)) > 1:
        return ranking_lines(document)
    return [answer.text() for answer in answers(document)]


Entries = list[tuple[str, list[PrintedFigure]]]


def summary_entries(documents: Sequence[RunDocument]) -> list[tuple[str, Entries]]:
    """summary.md's section: per run with no GPU cell, per predicted cell a heading sentence
    and one line per profile (the terminal's, for one cell), each with its figures; then,
    where several cells were predicted, their ranking per profile; then why the others were
    not. [] where nothing was predicted or said."""
    found: list[tuple[str, Entries]] = []
    for document in documents:
        if has_gpu_cell(document):
            continue
        for cell in predicted_cells(document):
            lines = [(answer.text(), figures_of(document, cell, name, answer))
                     for name, answer in cell_answers(document, cell)]
            if lines:
                found.append((f"Run `{document.run_id}`, {cell.framework} on {cell.device} "
                              f"({cell.variant}), predicted from this CPU run's features "
                              "(docs/predict.md):", lines))
        ranked = ranking_entries(document)
        if ranked:
            found.append((f"Run `{document.run_id}`, the predicted cells ranked on each GPU "
                          "(each against its own CPU step above):", ranked))
        why = not_predicted_line(document)
        if why:
            found.append((f"Run `{document.run_id}`, not predicted:", [(why, [])]))
    return found
