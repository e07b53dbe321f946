"""report.html: summary.md as one self-contained page, figures embedded as base64 data URIs.

markdown-it-py renders the markdown (CommonMark plus GFM pipe tables; rich already depends on
it); this module adds only the page around it. Raw HTML in the markdown is escaped, never
passed through: table cells hold model names, reasons and error text. Why embedded figures:
the page must read offline and survive being mailed or uploaded as a CI artefact on its own.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

HTML_FILE = "report.html"
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
figure { margin: 1em 0; } img { max-width: 100%; height: auto; }
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


def _alone(token: Token) -> bool:
    """An inline token that holds one image and nothing else (an image on its own line)."""
    return token.children is not None and [c.type for c in token.children] == ["image"]


def _unwrap_figures(state: StateCore) -> None:
    """No <p> around a lone image: it renders as a <figure>, which a <p> may not hold."""
    tokens = state.tokens
    for index in range(len(tokens) - 2):
        if tokens[index].type == "paragraph_open" and _alone(tokens[index + 1]):
            tokens[index].hidden = tokens[index + 2].hidden = True


def _image(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
           env: EnvType) -> str:
    """The image from env["images"] (a data URI) or a visible note that it is missing; a
    figure with the alt text as its caption when the image stands alone."""
    token = tokens[idx]
    target = MARKDOWN.normalizeLinkText(str(token.attrGet("src")))  # undo the %-encoding
    source = env["images"](target)
    token.attrSet("src", source or "")
    tag = renderer.image(tokens, idx, options, env)  # sets alt to the text of the alt markdown
    if source is None:
        tag = f'<span class="missing">[missing figure: {html.escape(target)}]</span>'
    if len(tokens) > 1:
        return tag
    caption = html.escape(str(token.attrGet("alt")))
    return f"<figure>{tag}<figcaption>{caption}</figcaption></figure>"


# html=False escapes raw HTML; xhtmlOut=False writes HTML5's <img ...> rather than <img ... />.
MARKDOWN = MarkdownIt("commonmark", {"html": False, "xhtmlOut": False}).enable("table")
MARKDOWN.core.ruler.push("unwrap_figures", _unwrap_figures)
MARKDOWN.add_render_rule("image", _image)


def page(body: str, title: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n")


def write_html_report(summary_path: Path, out_path: Path | None = None) -> Path:
    """report.html beside summary.md (or at OUT_PATH), every figure embedded."""
    summary_path = Path(summary_path)
    out_path = Path(out_path) if out_path else summary_path.with_name(HTML_FILE)
    env = {"images": embedder(summary_path.parent)}
    tokens = MARKDOWN.parse(summary_path.read_text(), env)
    title = next((tokens[i + 1].content for i, token in enumerate(tokens)
                  if token.type == "heading_open"), "Benchmark report")
    body = MARKDOWN.renderer.render(tokens, MARKDOWN.options, env)
    from harness.data.store import write_bytes_atomic

    write_bytes_atomic(out_path, page(body, title).encode())
    return out_path
