"""report.html: summary.md as one self-contained page, figures embedded as base64 data URIs.

Why our own converter: summary.md uses a small markdown subset (headings, paragraphs, "- "
lists, pipe tables with escaped pipes, images on their own line, **bold**, `code`, links), and
a dependency for that would be heavier than the code. Why embedded figures: the page must read
offline and survive being mailed or uploaded as a CI artefact on its own.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable
from pathlib import Path

HTML_FILE = "report.html"
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
LIST_ITEM = re.compile(r"^[-*]\s+(.*)$")
IMAGE_LINE = re.compile(r"^!\[([^\]]*)\]\(([^)\s]+)\)$")
TABLE_RULE = re.compile(r"^\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*$")
INLINE_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
BOLD = re.compile(r"\*\*(.+?)\*\*")
MIME_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
              ".svg": "image/svg+xml", ".gif": "image/gif"}
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em;
       color: #1a1a1a; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; display: block;
        overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tr:nth-child(even) td { background: #fafafa; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; font-size: .9em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: .9em; } .missing { color: #b00; }
"""

ImageSource = Callable[[str], str | None]


def data_uri(path: Path) -> str | None:
    """The file as a data: URI, or None when it cannot be read (the page then says so)."""
    try:
        payload = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return None
    mime = MIME_TYPES.get(path.suffix.lower(), "application/octet-stream")
    return f"data:{mime};base64,{payload}"


def embedder(base_dir: Path) -> ImageSource:
    """Local image paths (relative to the markdown file) become data URIs; URLs stay as they are."""
    def source(target: str) -> str | None:
        if re.match(r"^[a-z]+:", target):
            return target
        return data_uri(base_dir / target)
    return source


def _image(alt: str, target: str, images: ImageSource) -> str:
    source = images(target)
    if source is None:
        return f'<span class="missing">[missing figure: {html.escape(target)}]</span>'
    return f'<img src="{html.escape(source, quote=True)}" alt="{html.escape(alt, quote=True)}">'


def inline(text: str, images: ImageSource) -> str:
    """Escape, then `code` (left literal), images, links and **bold** in the rest."""
    parts = text.split("`")
    out = []
    for index, part in enumerate(parts):
        if index % 2 == 1 and index < len(parts) - 1:  # inside a closed code span
            out.append(f"<code>{html.escape(part)}</code>")
            continue
        if index % 2 == 1:  # an unclosed backtick is a literal backtick
            part = "`" + part
        part = html.escape(part, quote=False)
        part = INLINE_IMAGE.sub(lambda m: _image(m[1], html.unescape(m[2]), images), part)
        part = LINK.sub(lambda m: f'<a href="{html.escape(html.unescape(m[2]), quote=True)}">'
                        f"{m[1]}</a>", part)
        out.append(BOLD.sub(r"<strong>\1</strong>", part))
    return "".join(out)


def split_row(line: str) -> list[str]:
    """Cells of a pipe-table row; '\\|' is a literal pipe inside a cell."""
    body = line.strip().removeprefix("|")
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def _table(lines: list[str], images: ImageSource) -> str:
    header = "".join(f"<th>{inline(cell, images)}</th>" for cell in split_row(lines[0]))
    rows = ["<tr>" + "".join(f"<td>{inline(cell, images)}</td>" for cell in split_row(line))
            + "</tr>" for line in lines[2:]]
    return f"<table>\n<thead><tr>{header}</tr></thead>\n<tbody>\n" + "\n".join(rows) + \
        "\n</tbody>\n</table>"


def _is_table_start(lines: list[str], index: int) -> bool:
    return (lines[index].lstrip().startswith("|") and index + 1 < len(lines)
            and bool(TABLE_RULE.match(lines[index + 1].strip())))


class _Blocks:
    """Collects HTML blocks; paragraphs and lists stay open until something else starts."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.paragraph: list[str] = []
        self.items: list[str] = []

    def close(self) -> None:
        if self.paragraph:
            self.out.append("<p>" + " ".join(self.paragraph) + "</p>")
        if self.items:
            self.out.append("<ul>\n" + "\n".join(f"<li>{item}</li>" for item in self.items)
                            + "\n</ul>")
        self.paragraph, self.items = [], []

    def add(self, block: str) -> None:
        self.close()
        self.out.append(block)


def markdown_to_html(text: str, images: ImageSource) -> str:
    """The body HTML of the markdown subset summary.md uses."""
    lines = text.splitlines()
    blocks = _Blocks()
    index = 0
    while index < len(lines):
        line = lines[index].rstrip()
        heading, item, image = HEADING.match(line), LIST_ITEM.match(line), IMAGE_LINE.match(line)
        if not line.strip():
            blocks.close()
        elif _is_table_start(lines, index):
            end = index + 2
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            blocks.add(_table(lines[index:end], images))
            index = end
            continue
        elif heading:
            level = len(heading[1])
            blocks.add(f"<h{level}>{inline(heading[2], images)}</h{level}>")
        elif image:
            blocks.add(f"<figure>{_image(image[1], image[2], images)}"
                       f"<figcaption>{html.escape(image[1])}</figcaption></figure>")
        elif item:
            if blocks.paragraph:
                blocks.close()
            blocks.items.append(inline(item[1], images))
        else:
            if blocks.items:
                blocks.close()
            blocks.paragraph.append(inline(line.strip(), images))
        index += 1
    blocks.close()
    return "\n".join(blocks.out)


def page(body: str, title: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n")


def write_html_report(summary_path: Path, out_path: Path | None = None) -> Path:
    """report.html beside summary.md (or at OUT_PATH), every figure embedded."""
    summary_path = Path(summary_path)
    out_path = Path(out_path) if out_path else summary_path.with_name(HTML_FILE)
    text = summary_path.read_text()
    first = next((m[2] for m in map(HEADING.match, text.splitlines()) if m), "Benchmark report")
    body = markdown_to_html(text, embedder(summary_path.parent))
    from harness.data.store import write_bytes_atomic

    write_bytes_atomic(out_path, page(body, first).encode())
    return out_path
