"""The GPU predictions a run stored and printed (issue 51), recomputed from its features.

Stored (run.json, a case's `gpu_predictions`): each prediction is made again from the
case's stored features and the profile it names (harness.predict.model.recompute), with its
own choices (host, variant, this host's speed), and its seconds must agree; its seconds must
also follow from its own stored terms (Prediction.recombined). A profile that cannot be read
now, or whose identity differs from the one the prediction names (a shipped profile replaced
since), makes that prediction unverifiable, said so.

Printed (summary.md's records of family answer.FAMILY): each figure recomputed from the
case's raw samples with numpy (the CPU step, the noise) and from the recomputed prediction
(the GPU step, its interval or that it is too wide), then held to the printed text. A stored
prediction names its cell's framework, and its variant where it names one.

The ranking line (records of family ranking.RANKING_FAMILY): each ranked cell's step made
again from its features, its text and its place among every CPU cell of the run predicted on
that profile at that size; this CPU's fastest cell from the raw samples (numpy).
"""

from __future__ import annotations

import numpy as np

from harness.audit.ledger import FigureCheck, Ledger
from harness.audit.pool import Pool
from harness.core.units import device_kind, three_digits
from harness.data.gpustep import Prediction
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.predict.answer import (
    FEATURES_KEY,
    LINE_HOST,
    STEPS_KEY,
    cell_label,
    interval_figure,
    ms,
)
from harness.predict.interval import Interval, band_for, interval_of
from harness.predict.jaxfeatures import load_features
from harness.predict.jaxmodel import model_version, prediction_identity, recompute_any
from harness.predict.profile import Profile, ProfileError, load_profile
from harness.predict.ranking import FASTEST_CPU, RANKED
from harness.spec import Status

WHERE = "run.json"
TOLERANCE = 1e-9


def _case_subject(cell: CellResult, case: CaseResult) -> str:
    sizes = ", ".join(f"{name}={value}" for name, value in case.case.items())
    return f"{cell.framework} {cell.device} {cell.variant} ({sizes})"


def readable_profile(ledger: Ledger, subject: str, name: str,
                     stored: Prediction, priced_by: str) -> Profile | None:
    """The profile NAME as the prediction used it (the model of framework PRICED_BY), else
    None with the reason noted."""
    try:
        profile = load_profile(name)
    except ProfileError as why:
        ledger.cannot(subject, f"prediction on {name}", WHERE, f"profile unreadable now: {why}")
        return None
    if prediction_identity(profile, name, priced_by) != stored.profile:
        ledger.cannot(subject, f"prediction on {name}", WHERE,
                      "the profile changed since the run (its identity differs)")
        return None
    return profile


def check_named_cell(ledger: Ledger, subject: str, cell: CellResult,
                     stored: Prediction) -> None:
    """A stored prediction names its own cell's framework, and variant where it names one."""
    named = [("framework", stored.framework, cell.framework)]
    if stored.cell_variant:
        named.append(("cell_variant", stored.cell_variant, cell.variant))
    for key, value, own in named:
        ledger.verdict(subject, f"prediction's {key}", WHERE, value == own, value, own)


def check_case(ledger: Ledger, subject: str, case: CaseResult,
               cell: CellResult | None = None) -> None:
    """Every stored prediction of one case, recomputed from its features and profile."""
    record = case.extra.get(FEATURES_KEY)
    if not isinstance(record, dict):
        ledger.cannot(subject, "GPU predictions", WHERE, "no stored features to predict from")
        return
    features = load_features(record)  # torch's, a jitted JAX step's, TensorFlow's stand-in
    for name, by_host in case.gpu_predictions.items():
        for host, stored in by_host.items():
            if cell is not None:
                check_named_cell(ledger, subject, cell, stored)
            # The model that priced it is the features' framework's (a stored record names
            # its cell's framework, the same in a real run).
            priced_by = getattr(features, "framework", "") or stored.framework
            current = model_version(priced_by)
            if stored.model_version != current:  # an older model's terms differ
                ledger.cannot(subject, f"prediction on {name}", WHERE,
                              f"made by model version {stored.model_version}; this harness's "
                              f"{stored.framework} model is version {current}")
                continue
            profile = readable_profile(ledger, subject, name, stored, priced_by)
            if profile is None:
                continue
            again = recompute_any(stored, features, profile)
            figure = f"predicted GPU step on {name}, host {host}"
            ledger.verdict(subject, f"{figure}: status", WHERE, again.status == stored.status,
                           stored.status, again.status)
            ledger.number(subject, figure, WHERE, stored.seconds, again.seconds, TOLERANCE)
            if stored.seconds is not None:
                ledger.number(subject, f"{figure} from its terms", WHERE, stored.seconds,
                              stored.recombined(), TOLERANCE)


def check_predictions(ledger: Ledger, document: RunDocument) -> None:
    """Every prediction stored in DOCUMENT (module docstring)."""
    for cell in document.cells:
        for case in cell.cases:
            if case.gpu_predictions:
                check_case(ledger, _case_subject(cell, case), case, cell)


# --- printed figures ---------------------------------------------------------------------------

def numpy_cpu_step(case: CaseResult) -> float:
    """The case's CPU step from its raw samples: the median call over the steps in a call."""
    steps = float(case.extra.get("steps_per_call") or 1)
    return float(np.median(case.samples)) / steps


def numpy_noise(case: CaseResult) -> float:
    """The round medians' spread over their median; one round: IQR / median."""
    samples = np.asarray(case.samples, dtype=float)
    medians = [float(np.median(record.samples)) for record in case.rounds if record.samples]
    if len(medians) >= 2:
        return (max(medians) - min(medians)) / float(np.median(medians))
    q1, q3 = np.percentile(samples, [25, 75])
    return float((q3 - q1) / np.median(samples))


def _named_case(pool: Pool, subject: dict[str, str]) -> tuple[CellResult, CaseResult] | None:
    document = pool.document(subject.get("run", ""))
    if document is None:
        return None
    for cell in pool.cells_named(subject, [document]):
        for case in cell.cases:
            if str(case.case.get(document.sweep)) == subject.get("size"):
                return cell, case
    return None


def predicted_step(case: CaseResult, profile: str, host: str,
                   ) -> tuple[float | None, Interval | None]:
    """A CPU case's GPU step made again from its stored features on PROFILE as HOST, per step,
    and the interval around it held to the case's own spread (None: unknown; no band)."""
    stored = case.gpu_predictions[profile][host]
    again = recompute_any(stored, load_features(case.extra[FEATURES_KEY]),
                          load_profile(profile))
    if again.seconds is None:
        return None, None
    step = again.seconds / float(case.extra.get(STEPS_KEY) or 1)
    band = band_for(profile, str(again.profile.get("identity")), host, again.regime,
                    again.framework)
    return step, None if band is None else interval_of(step, band, numpy_noise(case))


def recomputed_texts(case: CaseResult, name: str) -> dict[str, str] | None:
    """The printed texts of one answer, recomputed (None where the prediction cannot be)."""
    gpu, interval = predicted_step(case, name, LINE_HOST)
    if gpu is None:
        return None
    ratio = numpy_cpu_step(case) / gpu
    texts = {"predicted GPU step": f"~{ms(gpu)} ms per step",
             "GPU vs this CPU": f"~{three_digits(ratio if ratio >= 1 else 1 / ratio)}x"}
    if interval is not None:
        texts["interval"] = interval_figure(interval)
    return texts


def check_printed_prediction(check: FigureCheck, pool: Pool) -> None:
    """One printed figure of a predicted-GPU line against its recomputation."""
    subject = check.figure.subject
    found = _named_case(pool, dict(subject))
    check = check.about(" ".join(str(subject.get(key, "")) for key in ("framework", "device",
                                                                         "size")))
    if found is None:
        check.cannot("no such case in run.json")
        return
    try:
        texts = recomputed_texts(found[1], subject.get("profile", ""))
    except (KeyError, ProfileError) as why:
        check.cannot(f"cannot recompute: {why}")
        return
    expected = (texts or {}).get(check.figure.name)
    if expected is None:
        check.cannot("the recomputed prediction has no such figure")
    else:
        check.text_is(expected)


# --- the ranking line ------------------------------------------------------------------------

def recomputed_rank(document: RunDocument, profile: str, size: str,
                    ) -> list[tuple[float, CellResult]]:
    """Every CPU cell of DOCUMENT predicted on PROFILE at SIZE, made again, fastest first."""
    found = []
    for cell in document.cells:
        if device_kind(cell.device) != "cpu":
            continue
        for case in cell.cases:
            if (str(case.case.get(document.sweep)) == size and case.status == Status.OK
                    and case.samples and profile in case.gpu_predictions):
                step, _interval = predicted_step(case, profile, LINE_HOST)
                if step is not None:
                    found.append((step, cell))
    return sorted(found, key=lambda pair: pair[0])


def check_ranked(check: FigureCheck, document: RunDocument, subject: dict[str, str]) -> None:
    """One ranked cell: its text from its step made again, its place among the others."""
    ranked = recomputed_rank(document, subject.get("profile", ""), subject.get("size", ""))
    named = (subject.get("framework"), subject.get("device"), subject.get("variant"))
    place = next((index for index, (_step, cell) in enumerate(ranked)
                  if (cell.framework, cell.device, cell.variant) == named), None)
    if place is None:
        check.cannot("no such cell predicted at this size now")
        return
    label = subject.get("label", "")
    if label not in (str(named[0]), cell_label(str(named[0]), str(named[2]))):
        check.verdict(False, label, cell_label(str(named[0]), str(named[2])), "label")
    check.text_is(f"{label} ~{ms(ranked[place][0])} ms")
    check.verdict(str(place) == subject.get("rank"), str(subject.get("rank")), str(place),
                  "place in the ranking")


def check_cpu_fastest(check: FigureCheck, document: RunDocument,
                      subject: dict[str, str]) -> None:
    """This CPU's fastest cell at the size, over the CPU cells of the ranked variants that
    ran there, from their raw samples."""
    variants = set(subject.get("variants", "").split(","))
    steps = []
    for cell in document.cells:
        if device_kind(cell.device) != "cpu" or cell.variant not in variants:
            continue
        for case in cell.cases:
            if (str(case.case.get(document.sweep)) == subject.get("size") and case.samples
                    and case.status == Status.OK):
                label = cell_label(cell.framework, cell.variant) if subject.get("labelled") \
                    else cell.framework
                steps.append((numpy_cpu_step(case), label))
    if not steps:
        check.cannot("no CPU cell ran at this size")
        return
    check.text_is(min(steps)[1])


def check_ranking(check: FigureCheck, pool: Pool) -> None:
    """One figure of a ranking line (module docstring)."""
    subject = dict(check.figure.subject)
    check = check.about(f"{subject.get('framework') or 'ranking'} on {subject.get('profile')} "
                        f"at {subject.get('size')}")
    document = pool.document(subject.get("run", ""))
    if document is None:
        check.cannot("no such run")
        return
    try:
        if check.figure.name == RANKED:
            check_ranked(check, document, subject)
        elif check.figure.name == FASTEST_CPU:
            check_cpu_fastest(check, document, subject)
        else:
            check.cannot("no recomputation for this figure")
    except (KeyError, ProfileError) as why:
        check.cannot(f"cannot recompute: {why}")
