"""A product tree, not a work log: small docs, no closing notes, every script listed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BENCHMARKS = ROOT / "benchmarks"
DOCS_LIMIT_BYTES = 3 * 1024 * 1024  # du -sh docs must read at most 3.0M
CLOSING_NOTE = "closing-note"


def test_docs_stay_under_three_megabytes() -> None:
    sizes = {path: path.stat().st_size for path in DOCS.rglob("*") if path.is_file()}
    largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:5]
    assert sum(sizes.values()) <= DOCS_LIMIT_BYTES, (
        f"docs/ holds {sum(sizes.values()) / 2**20:.1f} MiB; largest: "
        + ", ".join(f"{path.relative_to(ROOT)} ({sizes[path] // 1024} KiB)" for path in largest))


def test_no_closing_note_in_docs_or_linked_from_the_readme_or_docs() -> None:
    notes = [path.relative_to(ROOT).as_posix() for path in [*DOCS.rglob("*"), *ROOT.glob("*")]
             if CLOSING_NOTE in path.name.lower()]
    assert not notes, f"closing notes belong in the issue, not the tree: {notes}"
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    links = [f"{page.relative_to(ROOT)} -> {target}" for page in pages
             for target in re.findall(r"\]\(([^)]+)\)", page.read_text(encoding="utf-8"))
             if CLOSING_NOTE in target.lower()]
    assert not links, f"closing notes linked: {links}"


def listed_scripts() -> set[str]:
    """The file names in the first column of benchmarks/README.md's table."""
    text = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([^`/]+)` \|", text, flags=re.MULTILINE))


def test_benchmarks_readme_lists_every_script_and_only_existing_ones() -> None:
    present = {path.name for path in BENCHMARKS.iterdir()
               if path.is_file() and path.name != "README.md"}
    listed = listed_scripts()
    assert present - listed == set(), f"not in benchmarks/README.md: {sorted(present - listed)}"
    assert listed - present == set(), f"listed but missing: {sorted(listed - present)}"
