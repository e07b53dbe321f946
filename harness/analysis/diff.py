"""`harness diff RUN_A RUN_B`: did each case get faster or slower, beyond the noise?

Per matching case (workload, variant, framework, device, size) it compares the raw warm samples
of both runs: the ratio of medians B/A says how much, a two-sided Mann-Whitney U test says
whether the two sets of samples differ at all. The test is rank-based, so one outlier sample
(a page fault, a GC pause) cannot make a change significant, and it assumes no distribution
for timings, which are skewed and rarely normal. Runs measured on different machines or
framework versions are still compared, but every difference is listed first.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePath
from typing import Any

import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.core.units import format_seconds, size_label
from harness.data import store
from harness.data.casekey import CaseKey
from harness.data.export import read_run_table
from harness.data.results import RunDocument, sample_stats
from harness.spec import Status, worst_status_name

ALPHA = 0.05
MIN_SAMPLES = 5  # below this the normal approximation of U is too coarse to trust
METHOD = ("two-sided Mann-Whitney U test on the raw warm samples (normal approximation with "
          f"tie and continuity correction), alpha={ALPHA}; cases with fewer than {MIN_SAMPLES} "
          "samples per run are not judged; where both runs have >= 3 rounds, the round medians "
          "(one per worker process) must also differ: an exact Mann-Whitney test on them "
          f"(p < {ALPHA}) where the rounds allow that, else (3 rounds a side: the smallest "
          "possible p is 0.1) every round of one run beyond every round of the other; "
          "cases SUSPECT in either run never gate --fail-on-regression without --strict")
MIN_ROUNDS = 3  # below this the round medians are not tested (runs from before rounds: 1)
FAILED = {Status.ERROR.value, Status.INVALID.value, Status.TIMEOUT.value}
HOST_FIELDS = (("cpu_model", "host CPU"), ("cores", "usable cores"), ("gpus", "GPUs"),
               ("python", "Python"))


@dataclass
class CaseDiff:
    """One matching case of both runs and its verdict."""

    workload: str
    variant: str
    framework: str
    device: str
    size: str
    status_a: str
    status_b: str
    samples_a: int
    samples_b: int
    median_a_s: float | None
    median_b_s: float | None
    ratio: float | None  # median B / median A: < 1 means B is faster
    change_pct: float | None
    p_value: float | None
    verdict: str  # faster, slower, same, not judged, failed in B, fixed in B, ...
    regression: bool = False
    rounds_a: int = 1
    rounds_b: int = 1
    p_rounds: float | None = None  # exact Mann-Whitney on the round medians (>= 3 rounds each)
    rounds_apart: bool | None = None  # every round of B beyond every round of A, or below
    suspect: str = ""  # why either run's timing of this case is SUSPECT ('' if neither)


@dataclass
class RunDiff:
    """Everything `harness diff` reports."""

    run_a: str
    run_b: str
    threshold_pct: float
    fail_on_regression_pct: float | None
    cases: list[CaseDiff] = field(default_factory=list)
    only_in_a: list[dict[str, str]] = field(default_factory=list)
    only_in_b: list[dict[str, str]] = field(default_factory=list)
    mismatches: list[dict[str, str]] = field(default_factory=list)

    strict: bool = False  # SUSPECT cases gate --fail-on-regression too

    @property
    def regressions(self) -> list[CaseDiff]:
        return [case for case in self.cases if case.regression]

    @property
    def suspect(self) -> list[CaseDiff]:
        """Cases SUSPECT in either run (contended, throttled, bimodal): listed apart."""
        return [case for case in self.cases if case.suspect]

    def as_dict(self) -> dict[str, Any]:
        return {"method": METHOD, "alpha": ALPHA, "run_a": self.run_a, "run_b": self.run_b,
                "threshold_pct": self.threshold_pct,
                "fail_on_regression_pct": self.fail_on_regression_pct,
                "environment_mismatches": self.mismatches,
                "cases": [asdict(case) for case in self.cases],
                "only_in_a": self.only_in_a, "only_in_b": self.only_in_b,
                "strict": self.strict,
                "suspect": [asdict(case) for case in self.suspect],
                "regressions": [asdict(case) for case in self.regressions]}


# --- statistics -------------------------------------------------------------------------------

def average_ranks(values: list[float]) -> tuple[list[float], list[int]]:
    """1-based ranks with ties sharing their average rank, and the size of every tie group."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties: list[int] = []
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        ties.append(end - start + 1)
        start = end + 1
    return ranks, ties


def mann_whitney_u(first: list[float], second: list[float]) -> tuple[float, float]:
    """U statistic of FIRST and the two-sided p-value (normal approximation).

    The variance is reduced for ties (timings quantised by the clock tie often), and a
    continuity correction of 0.5 keeps small samples from looking more significant than
    the discrete U allows. Identical samples give p = 1.
    """
    n1, n2 = len(first), len(second)
    if n1 == 0 or n2 == 0:
        raise ValueError("both samples need at least one value")
    ranks, ties = average_ranks([*first, *second])
    u_first = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    total = n1 + n2
    tie_term = sum(t**3 - t for t in ties) / (total * (total - 1)) if total > 1 else 0.0
    variance = n1 * n2 / 12 * ((total + 1) - tie_term)
    if variance <= 0:
        return u_first, 1.0
    z = max(abs(u_first - n1 * n2 / 2) - 0.5, 0.0) / math.sqrt(variance)
    return u_first, min(1.0, math.erfc(z / math.sqrt(2)))


def exact_mann_whitney_p(first: list[float], second: list[float]) -> float:
    """Two-sided exact p of the Mann-Whitney U of two small samples (scipy's exact method).

    Ties count half in U and scipy rounds max(U1, U2) down, towards the middle of the no-tie
    distribution, so a tie errs on the large side: [1, 2, 3, 4] vs [4, 5, 6, 7] gives 0.057,
    as enumerating all 70 splits does (the hand-written test this replaced said 0.029).
    """
    # Lazily: scipy.stats takes about half a second to import, and only a diff of runs with
    # rounds needs it (harness.analysis.diff is off the CLI's start-up path all the same).
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(first, second, alternative="two-sided", method="exact").pvalue)


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the exact test can give with n1 and n2 values (complete
    separation): 2 / C(n1 + n2, n1). 3 rounds a side: 0.1."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def rounds_judgement(a: list[float], b: list[float]) -> tuple[float, bool | None, bool]:
    """(exact p on the round medians, whether they are apart, whether they differ enough)."""
    p = exact_mann_whitney_p(b, a)
    apart = max(a) < min(b) or max(b) < min(a)
    enough = p < ALPHA if smallest_p(len(a), len(b)) < ALPHA else apart
    return p, apart, enough


def verdict_for(change_pct: float, p_value: float, threshold_pct: float) -> str:
    """'faster'/'slower' only when the change is significant AND beyond the threshold."""
    if p_value >= ALPHA:
        return "same"
    if change_pct > threshold_pct:
        return "slower"
    if change_pct < -threshold_pct:
        return "faster"
    return "same"


# --- reading runs -----------------------------------------------------------------------------

@dataclass
class RunCases:
    """One run's document and, per case key, its status and warm samples (seconds per call)."""

    name: str
    document: RunDocument
    statuses: dict[CaseKey, str]
    samples: dict[CaseKey, list[float]]
    medians_by_round: dict[CaseKey, list[float]] = field(default_factory=dict)
    suspect: dict[CaseKey, str] = field(default_factory=dict)


def _worst(statuses: pd.Series) -> str:
    return worst_status_name([s for s in statuses if s], default="")


def load_cases(run_dir: Path) -> RunCases:
    """Read a run folder (StoreError when it is not one) into its cases, keyed on any machine
    (two runs of one case on different machines still compare)."""
    document = store.load_run(run_dir)
    table = read_run_table(run_dir)
    table["size"] = table["size"].map(lambda value: "" if pd.isna(value) else size_label(value))
    table = table[table["size"] != ""]  # cell-level status rows belong to no case
    statuses: dict[CaseKey, str] = {}
    samples: dict[CaseKey, list[float]] = {}
    medians_by_round: dict[CaseKey, list[float]] = {}
    suspect: dict[CaseKey, str] = {}
    keys = pd.Series([CaseKey.from_row(row).without("machine")
                      for row in table.to_dict("records")], index=table.index, dtype=object)
    for key, group in table.groupby(keys, sort=False):
        statuses[key] = _worst(group["status"])
        warm = group[(group["phase"] == "warm") & (group["status"] == Status.OK.value)]
        samples[key] = [float(s) for s in warm["seconds"].dropna()]
        rounds = (warm["round"].fillna(0) if "round" in warm
                  else pd.Series(0, index=warm.index)).astype(int)
        medians_by_round[key] = [float(part.median()) for _, part in
                                 warm["seconds"].groupby(rounds) if part.notna().any()]
        texts = [text for text in group.get("suspect", []) if isinstance(text, str) and text]
        suspect[key] = texts[0] if texts else ""
    return RunCases(str(run_dir), document, statuses, samples, medians_by_round, suspect)


# --- comparing --------------------------------------------------------------------------------

def compare_case(key: CaseKey, a: RunCases, b: RunCases, threshold_pct: float,
                 fail_pct: float | None, strict: bool = False) -> CaseDiff:
    status_a, status_b = a.statuses[key], b.statuses[key]
    samples_a, samples_b = a.samples.get(key, []), b.samples.get(key, [])
    median_a = sample_stats(samples_a).median if samples_a else None
    median_b = sample_stats(samples_b).median if samples_b else None
    diff = CaseDiff(key.experiment, key.variant, key.framework, key.device, key.size_label,
                    status_a=status_a, status_b=status_b, samples_a=len(samples_a),
                    samples_b=len(samples_b), median_a_s=median_a, median_b_s=median_b,
                    ratio=None, change_pct=None, p_value=None, verdict="not judged")
    rounds_a, rounds_b = a.medians_by_round.get(key, []), b.medians_by_round.get(key, [])
    diff.rounds_a, diff.rounds_b = max(1, len(rounds_a)), max(1, len(rounds_b))
    diff.suspect = "; ".join(f"{side}: {text}" for side, text in
                             (("A", a.suspect.get(key, "")), ("B", b.suspect.get(key, "")))
                             if text)
    gate = strict or not diff.suspect  # a contended timing is no evidence of a regression
    if status_a != Status.OK.value or status_b != Status.OK.value:
        diff.verdict = _status_verdict(status_a, status_b)
        # A case that worked before and fails now is the worst regression of all.
        diff.regression = fail_pct is not None and status_a == "ok" and status_b in FAILED
        return diff
    if median_a and median_b:
        diff.ratio = median_b / median_a
        diff.change_pct = (diff.ratio - 1) * 100
    if min(len(samples_a), len(samples_b)) < MIN_SAMPLES or diff.change_pct is None:
        return diff
    diff.p_value = mann_whitney_u(samples_a, samples_b)[1]
    p_for_verdict = diff.p_value
    if min(len(rounds_a), len(rounds_b)) >= MIN_ROUNDS:
        # Between processes: the pooled samples must differ AND the round medians must.
        diff.p_rounds, diff.rounds_apart, enough = rounds_judgement(rounds_a, rounds_b)
        if not enough:
            p_for_verdict = 1.0
    diff.verdict = verdict_for(diff.change_pct, p_for_verdict, threshold_pct)
    diff.regression = (gate and fail_pct is not None and p_for_verdict < ALPHA
                       and diff.change_pct > fail_pct)
    return diff


def _status_verdict(status_a: str, status_b: str) -> str:
    if status_a == Status.OK.value:
        return f"{status_b} in B"
    if status_b == Status.OK.value:
        return f"fixed in B (was {status_a})"
    return f"{status_a} -> {status_b}" if status_a != status_b else f"{status_a} in both"


def _case_dict(key: CaseKey, status: str) -> dict[str, str]:
    """A case found in one run only, as the report and --json list it."""
    return {"workload": key.experiment, "variant": key.variant, "framework": key.framework,
            "device": key.device, "size": key.size_label, "status": status}


def diff_runs(run_a: Path, run_b: Path, threshold_pct: float = 5.0,
              fail_on_regression_pct: float | None = None, strict: bool = False) -> RunDiff:
    """Compare two run folders case by case; StoreError when either is not a run.

    `strict`: cases SUSPECT in either run may fail --fail-on-regression too.
    """
    a, b = load_cases(Path(run_a)), load_cases(Path(run_b))
    result = RunDiff(a.name, b.name, threshold_pct, fail_on_regression_pct,
                     mismatches=environment_mismatches(a.document, b.document,
                                                       Path(run_a), Path(run_b)),
                     strict=strict)
    for key in a.statuses:
        if key in b.statuses:
            result.cases.append(compare_case(key, a, b, threshold_pct, fail_on_regression_pct,
                                             strict))
        else:
            result.only_in_a.append(_case_dict(key, a.statuses[key]))
    result.only_in_b = [_case_dict(key, status) for key, status in b.statuses.items()
                        if key not in a.statuses]
    return result


def holdings(cases: list[dict[str, str]]) -> str:
    """What a run measured, in one phrase per workload: its variants, cells and sizes.

    For `harness diff` of two runs that share no case, so the user sees why at a glance.
    """
    if not cases:
        return "no case"
    phrases = []
    for workload in dict.fromkeys(case["workload"] for case in cases):
        own = [case for case in cases if case["workload"] == workload]

        def listed(key: str, own: list[dict[str, str]] = own) -> str:
            return ", ".join(dict.fromkeys(case[key] for case in own))

        phrases.append(f"{workload} ({len(own)} case{'s' if len(own) != 1 else ''}: variant "
                       f"{listed('variant')}; {listed('framework')} on {listed('device')}; "
                       f"size {listed('size')})")
    return "; ".join(phrases)


def no_shared_case(result: RunDiff) -> str:
    """One line for two runs without a case in common: what each of them holds."""
    return (f"the runs share no case (workload, variant, framework, device and size must all "
            f"match): A {Path(result.run_a).name} holds {holdings(result.only_in_a)}; "
            f"B {Path(result.run_b).name} holds {holdings(result.only_in_b)}")


# --- environments -----------------------------------------------------------------------------

def _comparable_params(document: RunDocument, folder: Path | None = None) -> dict[str, Any]:
    """Parameters that define the measurement: not the swept one, data files by name only,
    and a path inside the run's own FOLDER as that folder names it."""
    params = dict(document.params)
    params.pop(document.sweep, None)
    if isinstance(params.get("data"), str):
        params["data"] = PurePath(params["data"]).name
    names = {name for name in (document.run_id, folder.name if folder else "") if name}
    for name, value in params.items():
        if isinstance(value, str):
            params[name] = in_own_folder(value, names)
    return params


# How a path inside a run's own folder is compared: it says what the run made, not where.
OWN_FOLDER = "<run folder>"


def in_own_folder(value: str, names: set[str]) -> str:
    """VALUE with everything up to the run folder (one of NAMES) replaced by OWN_FOLDER: a
    --model run keeps its prepared weights in 'results/<run id>/model', so two runs of one
    file differ only in where their folders live (issue 49); other values as they are."""
    parts = PurePath(value).parts
    found = [index for index, part in enumerate(parts) if part in names]
    if not found:
        return value
    return PurePath(OWN_FOLDER, *parts[found[-1] + 1:]).as_posix()


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    return "-" if value in (None, "") else str(value)


def _cell_facts(document: RunDocument) -> dict[str, str]:
    """Framework versions and device names as each run recorded them."""
    facts: dict[str, str] = {}
    for result in document.cells:
        if result.framework_version:
            facts.setdefault(f"{result.framework} version", result.framework_version)
        if result.device_name:
            facts.setdefault(f"{result.framework} {result.device} device name",
                             result.device_name)
    return facts


def environment_mismatches(a: RunDocument, b: RunDocument, folder_a: Path | None = None,
                           folder_b: Path | None = None) -> list[dict[str, str]]:
    """Every recorded fact that differs between the runs: what, A's value, B's value (the
    runs' folders, where given: a path inside its own folder is compared within it)."""
    found = []

    def note(what: str, value_a: Any, value_b: Any) -> None:
        if _text(value_a) != _text(value_b):
            found.append({"what": what, "a": _text(value_a), "b": _text(value_b)})

    note("workload", a.workload, b.workload)
    params_a, params_b = _comparable_params(a, folder_a), _comparable_params(b, folder_b)
    for name in dict.fromkeys([*params_a, *params_b]):
        note(f"param {name}", params_a.get(name), params_b.get(name))
    note("quick", a.quick, b.quick)
    for key, label in HOST_FIELDS:
        note(label, a.host_fact(key), b.host_fact(key))
    facts_a, facts_b = _cell_facts(a), _cell_facts(b)
    for what in dict.fromkeys([*facts_a, *facts_b]):
        if what in facts_a and what in facts_b:  # a cell run on one side only is listed apart
            note(what, facts_a[what], facts_b[what])
    return found


# --- rendering --------------------------------------------------------------------------------

VERDICT_STYLES = {"faster": "green", "slower": "red", "same": "", "not judged": "dim"}


def diff_table(result: RunDiff) -> Table:
    """The verdict per matching case, B against A: one line per case where the width allows
    (figures whole; names and a long verdict folded where it does not; the ratio B/A
    is in --json, the change says the same). A column no case has a figure for is left out."""
    table = Table(title=f"B against A per case: A = {Path(result.run_a).name}, "
                        f"B = {Path(result.run_b).name}",
                  box=box.HORIZONTALS, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                  title_justify="left")
    several = len({case.workload for case in result.cases}) > 1
    columns: dict[str, list[str]] = {
        "workload": [case.workload for case in result.cases] if several else [],
        "variant": [case.variant for case in result.cases],
        "framework": [case.framework for case in result.cases],
        "device": [case.device for case in result.cases],
        "size": [case.size for case in result.cases],
        "median A": [format_seconds(case.median_a_s) for case in result.cases],
        "median B": [format_seconds(case.median_b_s) for case in result.cases],
        "change": ["-" if case.change_pct is None else f"{case.change_pct:+.1f}%"
                   for case in result.cases],
        "p": ["-" if case.p_value is None else f"{case.p_value:.2g}" for case in result.cases],
        "p rounds": ["-" if case.p_rounds is None else
                     f"{case.p_rounds:.2g} ({case.rounds_a}/{case.rounds_b})"
                     for case in result.cases],
        "n A/B": [f"{case.samples_a}/{case.samples_b}" for case in result.cases],
    }
    shown = {header: values for header, values in columns.items()
             if values and any(value != "-" for value in values)}
    names = {"workload", "variant", "framework"}
    for header, values in shown.items():
        longest = max([len(header), *map(len, values)])
        table.add_column(header, no_wrap=header not in names, overflow="fold",
                         min_width=None if header in names else longest)
    verdicts = [case.verdict + (" REGRESSION" if case.regression else "")
                + (" SUSPECT" if case.suspect else "") for case in result.cases]
    table.add_column("verdict", overflow="fold", min_width=max(
        len(word) for text in [*verdicts, "verdict"] for word in text.split()))
    for index, (case, verdict) in enumerate(zip(result.cases, verdicts)):
        style = VERDICT_STYLES.get(case.verdict, "yellow")
        table.add_row(*(escape(values[index]) for values in shown.values()),
                      f"[{style}]{escape(verdict)}[/]" if style else escape(verdict))
    return table


def method_text(result: RunDiff) -> str:
    """How a verdict is reached, said under the table (a caption would be centred)."""
    return (f"significance: {METHOD}; faster/slower only when significant and the change is "
            f"beyond {result.threshold_pct:g}%")


def print_diff(console: Console, result: RunDiff) -> None:
    """Mismatches first (they qualify every number), then the table, then unmatched cases."""
    if result.mismatches:
        console.print("[yellow]environments differ (compared anyway, judge with care):[/]")
        for item in result.mismatches:
            console.print(f"  {escape(item['what'])}: A {escape(item['a'])}, "
                          f"B {escape(item['b'])}")
    if result.cases:
        console.print(diff_table(result))
        console.print(method_text(result), markup=False, highlight=False)
    else:
        console.print("no case was measured in both runs")
    for label, cases in (("only in A", result.only_in_a), ("only in B", result.only_in_b)):
        for case in cases:
            console.print(f"{label}: {case['workload']} {case['variant']} {case['framework']} "
                          f"{case['device']} size {case['size']} ({case['status']})")
    if result.suspect:
        console.print(f"[yellow]SUSPECT in either run ({len(result.suspect)} cases"
                      + ("" if result.strict else "; they do not fail --fail-on-regression "
                         "without --strict") + "):[/]")
        for flagged in result.suspect:
            console.print(f"  {escape(flagged.framework)} {escape(flagged.device)} "
                          f"{escape(flagged.variant)} size {escape(flagged.size)}: "
                          f"{escape(flagged.verdict)}; {escape(flagged.suspect[:200])}")
    if result.fail_on_regression_pct is not None:
        regressions = result.regressions
        console.print(f"regressions beyond {result.fail_on_regression_pct:g}%: "
                      f"{len(regressions)}" + (": " + ", ".join(
                          f"{c.framework} {c.device} {c.variant} size {c.size}"
                          for c in regressions) if regressions else ""))
