"""MkDocs hooks of the docs site (``hooks:`` in mkdocs.yml): the pages that are derived, not
written.

- The CLI reference: ``<!-- lanenb-cli-help -->`` on a page becomes ``lanenb --help`` and the
  help of every command and sub-command, from the parsers themselves (``lanenb.cli.build_parser``,
  which imports no torch), so the page cannot drift from the flags.
- The cluster admin's page is ``deploy/README.md``, beside the manifests it applies; the site
  shows that file as ``guide/cluster-setup.md`` instead of keeping a copy.
- A notebook page's table of contents: mkdocs-jupyter drops every code span from the headings
  it lists (``2. Train with `%lanetrain` `` read "2. Train with", linked to an anchor no heading
  has); it is made again from the markdown cells, code spans kept, as a Markdown page's is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

import markdown
from markdown.extensions.toc import TocExtension
from mkdocs.structure.files import File, Files
from mkdocs.structure.toc import AnchorLink, TableOfContents

ROOT = Path(__file__).resolve().parents[1]
CLI_MARKER = "<!-- lanenb-cli-help -->"
# repository files outside docs/ that the site shows as pages: site path -> file
EXTERNAL_PAGES = {"guide/cluster-setup.md": ROOT / "deploy" / "README.md"}
HELP_WIDTH = "100"  # argparse wraps help to $COLUMNS: a fixed width gives the same page everywhere


def on_files(files: Files, config: Any) -> Files:
    for src_uri, path in EXTERNAL_PAGES.items():
        files.append(File.generated(config, src_uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if CLI_MARKER not in markdown:
        return markdown
    return markdown.replace(CLI_MARKER, cli_reference())


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        page.toc = notebook_toc(Path(page.file.abs_src_path))
    return html


def notebook_toc(path: Path) -> TableOfContents:
    """The headings of a notebook's markdown cells, as Python-Markdown's ``toc`` extension makes
    them for a page (the anchors are the ones nbconvert gives the headings); each entry's title
    keeps its code spans (Material shows ``typeset.title``, as its typeset plugin sets it)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)  # a "# comment" in a fence is no heading
    md = markdown.Markdown(extensions=[TocExtension()])
    md.convert(text)

    def link(token: dict[str, Any]) -> AnchorLink:
        anchor = AnchorLink(token["name"], token["id"], token["level"])
        anchor.typeset = {"title": token["html"]}  # type: ignore[attr-defined]
        anchor.children = [link(t) for t in token["children"]]
        return anchor

    return TableOfContents([link(t) for t in md.toc_tokens])


def commands(parser: argparse.ArgumentParser, prog: str = "lanenb") -> list[tuple[str, argparse.ArgumentParser]]:
    """``(command line, parser)`` for the program and every sub-command under it, depth first,
    in the order the parsers register them."""
    found = [(prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += commands(sub, f"{prog} {name}")
    return found


def cli_reference() -> str:
    from lanenb.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        parts = [f"## `{line}`\n\n```text\n{sub.format_help().rstrip()}\n```\n"
                 for line, sub in commands(build_parser())]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(parts)
