"""The GPU prediction of a CPU-only run, stored and printed (issue 51, part 4; the model and
the lines: harness/predict/answer.py).

Why here, after the run and before its report: the features were recorded by the workers
(harness/run/casepasses.py features_pass); predicting costs milliseconds and no process, and
the report and `harness check` must both see the predictions in run.json.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness import api
from harness.commands.output import Said, errors
from harness.data import store


def check_predict_for(asked: Sequence[str] | None) -> None:
    """ProfileError (a BadInput: one line, exit 2, nothing written) for a --predict-for that
    names no shipped profile (the line lists them), or a file that is no profile or of a
    newer schema."""
    from harness.predict.answer import check_asked

    check_asked(list(asked or []))


def store_predictions(result: api.RunResult, asked: Sequence[str] | None) -> None:
    """Every CPU case with features predicted on every shipped and asked profile, and run.json
    written again with them. A failure here costs the prediction, never the run."""
    if result.stopped_by is not None:
        return
    from harness.predict.answer import add_predictions, targets

    try:
        if add_predictions(result.document, targets(list(asked or []))):
            store.write_run(result.path, result.document)
    except Exception as exc:  # noqa: BLE001 - the measurements are saved already
        errors.print(f"GPU prediction not made: {type(exc).__name__}: {exc}", markup=False)


def with_predictions(result: api.RunResult, verdicts: list[str]) -> list[str]:
    """VERDICTS with the 'no GPU cell measured' line replaced by the predicted GPU lines (or,
    where a torch CPU cell could not be predicted, followed by why); on a GPU run, with the
    prediction's check against the GPU measured (with_check_line)."""
    from harness.predict.answer import answer_lines, no_features_line

    predicted = [f"  {line}" for line in answer_lines(result.document)]
    why = no_features_line(result.document)
    found: list[str] = []
    for line in verdicts:
        if "no GPU cell measured" in line and predicted:
            found += predicted
            continue
        found.append(line)
        if "no GPU cell measured" in line and why:
            found.append(f"  {why}")
    return with_check_line(result, found)


def with_check_line(result: api.RunResult, verdicts: list[str]) -> list[str]:
    """VERDICTS with the GPU run's own check of the prediction (harness/predict/versus.py)
    under its last GPU-vs-CPU line (at the end where there is none); unchanged where the run
    has no CPU cell predicted and GPU cell measured of the same case."""
    from harness.predict.versus import check_line

    line = check_line([result.document])
    if not line:
        return verdicts
    gpu_lines = [index for index, text in enumerate(verdicts) if "GPU vs CPU" in text]
    at = gpu_lines[-1] + 1 if gpu_lines else len(verdicts)
    return [*verdicts[:at], f"  {line}", *verdicts[at:]]


def print_predictions(say: Said, result: api.RunResult) -> None:
    """advise's form: the predicted GPU lines under their own heading, after the advice."""
    from harness.predict.answer import answer_lines

    lines = answer_lines(result.document)
    if lines:
        say("GPU step predicted (no GPU here):")
    for line in lines:
        say(f"  {line}")
