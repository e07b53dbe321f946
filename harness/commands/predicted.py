"""The GPU prediction of a CPU-only run, printed (issue 51, part 4; the model and the lines:
harness/predict/answer.py and ranking.py).

Stored by the run's own end (harness.api._finish: the CLI and harness.compare() give the same
run.json): the features were recorded by the workers (harness/run/casepasses.py
features_pass); predicting costs milliseconds and no process, and the report and `harness
check` must both see the predictions in run.json. Here: the bad --predict-for refused before
the run, and the lines under the verdict.
"""

from __future__ import annotations

from harness import api
from harness.analysis.verdictline import Topic, VerdictLine
from harness.commands.output import Said


def predicted_lines(result: api.RunResult) -> tuple[list[str], str]:
    """(the predicted GPU lines: each predicted cell's per profile, or where several cells
    were predicted their ranking per profile; the run's one line on the CPU cells that have
    no prediction, '' where none lacks one)."""
    from harness.predict.ranking import answer_lines, not_predicted_line

    return answer_lines(result.document), not_predicted_line(result.document)


def indented(text: str) -> list[str]:
    """TEXT under the verdict, two spaces in (printing folds it at the terminal's width:
    harness.commands.output.print_plain)."""
    return [f"  {text}"]


def with_predictions(result: api.RunResult,
                     verdicts: list[VerdictLine]) -> list[VerdictLine]:
    """VERDICTS with the line that no GPU cell measured (Topic.NO_GPU) replaced by the
    predicted GPU lines (kept where nothing was predicted), followed by why the CPU cells
    without a prediction have none; on a GPU run, with the prediction's check against the GPU
    measured (with_check_line)."""
    predicted, why = predicted_lines(result)
    found: list[VerdictLine] = []
    for line in verdicts:
        if line.topic is not Topic.NO_GPU:
            found.append(line)
            continue
        if not predicted:
            found.append(line)
        found += [VerdictLine(folded) for text in [*predicted, why] if text
                  for folded in indented(text)]
    return with_check_line(result, found)


def with_check_line(result: api.RunResult,
                    verdicts: list[VerdictLine]) -> list[VerdictLine]:
    """VERDICTS with the GPU run's own check of the prediction (harness/predict/versus.py)
    under its last GPU-vs-CPU line (at the end where there is none); unchanged where the run
    has no CPU cell predicted and GPU cell measured of the same case."""
    from harness.predict.versus import check_line

    line = check_line([result.document])
    if not line:
        return verdicts
    gpu_lines = [index for index, verdict in enumerate(verdicts) if verdict.gpu_vs_cpu]
    at = gpu_lines[-1] + 1 if gpu_lines else len(verdicts)
    return [*verdicts[:at], *map(VerdictLine, indented(line)), *verdicts[at:]]


def print_predictions(say: Said, result: api.RunResult) -> None:
    """advise's form: the predicted GPU lines under their own heading, after the advice, each
    naming the framework and variant it is about; then why the others have none."""
    predicted, why = predicted_lines(result)
    if predicted or why:
        say("GPU step predicted (no GPU here):")
    for text in [*predicted, why]:
        for line in indented(text) if text else []:
            say(line)
