"""The warnings as the terminal says them: short, each reason in full in summary.md.

Why: on a busy 2-core VM one SUSPECT warning ran to 893 characters (the processes that
competed, with their ids and shares, the attempts, what the time may not be), and a run printed
one such line per case. summary.md's Warnings section keeps every word (and `--details` prints
them); the terminal names each SUSPECT case with the kind of its reasons, cases of the same
kinds on one line, under one heading that says what SUSPECT means and where the rest is.
"""

from __future__ import annotations

import re

SUSPECT_PREFIX = "warning: SUSPECT timing: "
# Said once, in the heading, rather than at the end of every SUSPECT line.
IDLE_TAIL = "; its time may not be what a loop of this call costs on an idle machine."
SUSPECT_HEADING = ("  warning: SUSPECT timing (its time may not be what a loop of the call costs "
                   "on an idle machine; each reason in full: summary.md, --details):")
# A warning's text longer than this is cut at a clause in the short form (about two lines
# at 100 columns), with where the rest is.
LONGEST_TEXT = 180
MORE = " (more: summary.md, --details)"
# Parts of a SUSPECT text that say how the harness retried, not why the time is in doubt.
RETRY_PARTS = ("contended in ", "not timed again", "its time may not be", "timed again")


def suspect_kinds(reason: str) -> str:
    """The kinds of a SUSPECT reason, without their figures' detail: 'bimodal single calls;
    other processes used 1.7 of 2 cores' from 'bimodal single calls: 83% near 160 us, 17% near
    3.96 ms; other processes used 1.7 of 2 cores (pip (7169) 0.6, ...) during the 0.19 s this
    case was timed; contended in all 3 attempts'."""
    kinds: list[str] = []
    for part in reason.split("; "):
        part = re.sub(r"^round \d+: ", "", part.strip())
        if not part or part.startswith(RETRY_PARTS):
            continue
        head = part.split(" (")[0].split(": ")[0]
        head = head.split(" during ")[0]
        if head and head not in kinds:
            kinds.append(head)
    return "; ".join(kinds) or reason.split("; ")[0]


def short_suspect_lines(lines: list[str]) -> list[str]:
    """SUSPECT warning lines ('  warning: SUSPECT timing: WHERE: REASON; its time may not
    ...') as one heading and one line per kind of reason, naming its cases; [] for none."""
    cases_by_kind: dict[str, list[str]] = {}
    for line in lines:
        text = line.strip().removeprefix(SUSPECT_PREFIX).removesuffix(IDLE_TAIL)
        where, _, reason = text.partition(": ")
        cases_by_kind.setdefault(suspect_kinds(reason), []).append(where)
    if not cases_by_kind:
        return []
    return [SUSPECT_HEADING, *(f"    {', '.join(cases)}: {kinds}"
                               for kinds, cases in cases_by_kind.items())]


def cut(text: str, limit: int = LONGEST_TEXT) -> str:
    """TEXT whole up to LIMIT characters; else cut at its last clause (or word) so that with
    where the rest is it holds LIMIT at most."""
    if len(text) <= limit:
        return text
    limit -= len(MORE)
    head = text[:limit]
    for mark in ("; ", ", ", " "):
        if mark in head[limit // 2:]:
            head = head[:head.rindex(mark)]
            break
    return head.rstrip(" ;,:") + MORE


NOISY_PREFIX = "warning: noisy (IQR/median > 10%): "
NOISY_TAIL = "; gaps smaller than the spread there are not meaningful."


def short_noisy_line(lines: list[str]) -> list[str]:
    """Noisy warning lines, one per cell, as one line that says what noisy means once."""
    cells = [line.strip().removeprefix(NOISY_PREFIX).removesuffix(NOISY_TAIL) for line in lines]
    return [f"  {NOISY_PREFIX.removesuffix('): ')}; gaps smaller than the spread there are not "
            f"meaningful): {'; '.join(cells)}"] if cells else []


def short_warnings(lines: list[str]) -> list[str]:
    """The warning lines of the terminal's short form: every SUSPECT one gathered under one
    heading (short_suspect_lines), every noisy one in one line, every other one cut to
    LONGEST_TEXT, in their order."""
    groups = {SUSPECT_PREFIX: short_suspect_lines, NOISY_PREFIX: short_noisy_line}
    members = {prefix: [line for line in lines if line.strip().startswith(prefix)]
               for prefix in groups}
    shown: list[str] = []
    for line in lines:
        prefix = next((prefix for prefix in groups if line.strip().startswith(prefix)), "")
        if prefix:
            shown += groups[prefix](members[prefix])  # the first one's place gets them all
            members[prefix] = []
            continue
        indent = line[:len(line) - len(line.lstrip())]
        shown.append(indent + cut(line.strip()))
    return shown
