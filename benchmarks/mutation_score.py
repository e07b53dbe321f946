"""The killed share per module from `mutmut results --all true`, restricted to the scope patterns.

Used by benchmarks/mutation.sh:  python mutation_score.py [--names] RESULTS.txt PATTERN...
(--names: print only the names of the mutants in scope that were not killed, one a line.)
A mutant counts as killed when a test failed on it or it timed out (an endless loop is noticed);
survived, no-tests and suspicious ones count against the suite.
"""

from __future__ import annotations

import fnmatch
import sys
from collections import Counter, defaultdict

KILLED = {"killed", "timeout"}


def module_of(mutant: str) -> str:
    """harness.report.tables.x_find_crossover__mutmut_3 -> harness.report.tables."""
    head = mutant.split("__mutmut_")[0]
    return head.rsplit(".", 1)[0]


def main(argv: list[str]) -> int:
    names_only = argv[:1] == ["--names"]
    argv = argv[1:] if names_only else argv
    results_path, patterns = argv[0], argv[1:]
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[str] = []
    for line in open(results_path, encoding="utf-8"):
        name, sep, status = line.strip().rpartition(": ")
        if not sep or not any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
            continue
        counts = by_module[module_of(name)]
        counts["total"] += 1
        counts["killed"] += status in KILLED
        if status not in KILLED:
            survivors.append(name if names_only else f"{name}: {status}")
    if names_only:
        print("\n".join(survivors))
        return 0
    total = Counter[str]()
    print(f"{'module':40} {'killed':>7} {'total':>6} {'share':>6}")
    for module in sorted(by_module):
        counts = by_module[module]
        total.update(counts)
        print(f"{module:40} {counts['killed']:7d} {counts['total']:6d} "
              f"{counts['killed'] / counts['total']:6.0%}")
    if total["total"]:
        print(f"{'all':40} {total['killed']:7d} {total['total']:6d} "
              f"{total['killed'] / total['total']:6.0%}")
    print("\nnot killed:")
    print("\n".join(survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
