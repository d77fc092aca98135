"""The docs site (mkdocs.yml, docs/) is built here on every CI run, by the one command the
README gives, with every warning an error and every internal link and #anchor checked; and what
a build cannot check is checked beside it: the README is a landing page whose first lines are the
two commands, the architecture doc is a one-page map, every public name the guide imports or
calls is in the API reference, every CLI command is on the CLI page, and the executed notebooks
the site shows hold exactly the cells of notebooks/."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
BUILD = [sys.executable, "-m", "mkdocs", "build", "--strict"]  # `mkdocs build --strict`, as the README says
README_MAX = 12_000  # bytes: a landing page, not a manual
MAP_MAX = 10_000  # docs/ARCHITECTURE.md: the layers and where a change goes; the detail is in docs/architecture/
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
DOTTED_CALL = re.compile(r"\b(lanenb(?:_trainer)?(?:\.\w+)+)\(")
DOTTED_SPAN = re.compile(r"`(lanenb(?:_trainer)?(?:\.\w+)+)`")
IMPORT_FROM = re.compile(r"from (lanenb[\w.]*) import ([\w, ]+)")
IMPORT_AS = re.compile(r"import (lanenb[\w.]*) as (\w+)")
NOT_NAMES = {"lanenb.headline_model"}  # an MLflow tag the trackers page names, not a Python name


def mkdocs(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # Material's banner about MkDocs 2.0: noise in a test log
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert importlib.util.find_spec("mkdocs") and importlib.util.find_spec("mkdocstrings"), (
        "the docs tools are missing: pip install -e '.[docs]' (scripts/setup.sh installs them with .[dev])")
    out = tmp_path_factory.mktemp("site")
    built = mkdocs([*BUILD, "--site-dir", str(out)], REPO)
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-6000:]}"
    return out


def page(site: Path, path: str) -> str:
    return (site / path / "index.html").read_text(encoding="utf-8")


def words(html: str) -> str:
    """A page's text without its tags (code highlighting splits code into spans)."""
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_the_site_builds_with_every_part(site):
    assert "Two Python packages" in page(site, "ARCHITECTURE")
    assert 'id="lanenb.jobs.TrainSpec"' in page(site, "reference/api/jobs")  # generated from the docstrings
    assert "--older-than" in words(page(site, "guide/cli"))  # `lanenb jobs prune --help`, generated at build time
    setup = words(page(site, "guide/cluster-setup"))  # deploy/README.md, shown where it is
    assert "kubectl apply --server-side -k deploy/mpi-operator" in setup
    events = words(page(site, "EVENTS"))
    assert "schema version" in events and "timing" in events
    quickstart = page(site, "notebooks/01-quickstart")
    assert "%lanetrain" in words(quickstart) and "succeeded" in words(quickstart)
    assert "data:image/png;base64" in quickstart  # the run's charts, from the executed copy


def api_object(html: str, ident: str) -> str:
    """The HTML of one object on an API page: from its heading to the next object's heading."""
    start = html.index(f'id="{ident}"')
    following = re.compile(r'<h\d id="[^"]+" class="doc doc-heading"').search(html, start)
    return html[start:following.start() if following else len(html)]


def test_a_docstring_example_renders_as_code(site):
    jobs = page(site, "reference/api/jobs")
    module = api_object(jobs, "lanenb.jobs")
    example = re.search(r"<pre><span></span><code>(.*?)</code></pre>", module, re.S)
    assert example, "the lanenb.jobs example is not a code block"
    assert "job.logs(follow=True)" in words(example.group(1))
    assert "<p>from lanenb.jobs import" not in module  # the run-on paragraph it was


def test_signatures_show_default_values_not_the_names_they_come_from(site):
    spec = words(api_object(page(site, "reference/api/jobs"), "lanenb.jobs.TrainSpec"))
    from lanenb.jobs import TrainSpec

    defaults = TrainSpec(dataset="d")
    assert f"batch_size: int = {defaults.batch_size}" in spec and "batch_size: int = 8" in spec
    assert f'engine: str = "{defaults.engine}"' in spec and f"use_val: bool = {defaults.use_val}" in spec
    shown = [html.relative_to(site) for html in (site / "reference" / "api").rglob("*.html")
             if "_TRAINER" in html.read_text(encoding="utf-8")]
    assert not shown, f"defaults shown as the private name they come from on {shown}"


def toc_links(html: str) -> list[tuple[str, str]]:
    """``(anchor, inner HTML)`` of each entry of a page's table of contents (Material's sidebar)."""
    toc = html[html.index('aria-label="Table of contents"'):]
    toc = toc[:toc.index("</nav>")]
    return re.findall(r'<a href="#([^"]+)" class="md-nav__link">\s*<span class="md-ellipsis">(.*?)</span>\s*</a>',
                      toc, re.S)


def test_a_notebook_pages_contents_keep_code_spans_and_link_to_their_headings(site):
    entries = toc_links(page(site, "notebooks/01-quickstart"))
    train = [inner for anchor, inner in entries if anchor == "2-train-with-lanetrain"]
    assert train and "<code>%lanetrain</code>" in train[0], entries
    for name in sorted(p.stem for p in (DOCS / "notebooks").glob("*.ipynb")):
        html = page(site, f"notebooks/{name}")
        ids = set(re.findall(r'id="([^"]+)"', html))
        assert toc_links(html) and {a for a, _ in toc_links(html)} <= ids, f"{name}: a contents entry links nowhere"


def test_the_sweeps_guide_shows_a_sweep_report(site):
    text = (DOCS / "guide" / "sweeps.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+\.png)\)", text)
    assert images, "docs/guide/sweeps.md has no picture"
    for image in images:
        assert (DOCS / "guide" / image).resolve().read_bytes().startswith(b"\x89PNG")
    assert "sweep-report.png" in page(site, "guide/sweeps")
    spec = importlib.util.spec_from_file_location("docs_sweep_image", REPO / "scripts" / "docs_sweep_image.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    # the picture is the executed sweep notebook's own report chart (scripts/docs_sweep_image.py)
    assert (DOCS / "images" / "sweep-report.png").read_bytes() == script.sweep_chart_png()


def test_the_build_fails_on_a_broken_link_or_anchor_or_a_page_left_out(tmp_path):
    """The repo's own validation settings, on a two-page site with one mistake of each kind: the
    build must stop and name each (so a broken link in docs/ fails CI, as the first test shows)."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[there](guide.md#no-such-heading) [gone](missing.md)\n")
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## A heading\n")
    (tmp_path / "docs" / "orphan.md").write_text("# Not in the nav\n")
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump({
        "site_name": "t", "strict": config["strict"], "validation": config["validation"],
        "markdown_extensions": ["toc"], "nav": ["index.md", "guide.md"]}))
    built = mkdocs([*BUILD, "--site-dir", str(tmp_path / "site")], tmp_path)
    assert built.returncode != 0
    assert "missing.md" in built.stderr and "#no-such-heading" in built.stderr and "orphan.md" in built.stderr


def test_readme_is_a_landing_page_that_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= README_MAX, f"README.md is {len(text.encode())} bytes; move detail into docs/guide/"
    lines = text.splitlines()
    assert lines[0] == "# lanenb" and lines[2] == "```bash", lines[:3]
    assert lines[3].startswith("bash scripts/setup.sh && lanenb notebook quickstart   # ")
    assert lines[4].startswith("python3 -m pytest -q   ") and lines[5] == "```"
    assert "python3 -m pytest -q" in (REPO / ".ci" / "run").read_text()  # CI runs the README's test command
    assert "![" in text and "mkdocs build --strict" in text


@pytest.mark.parametrize("doc", ["README.md", "deploy/README.md"])
def test_every_link_outside_the_site_resolves(doc):
    """README.md and deploy/README.md link into docs/ from outside the site, where mkdocs does not look."""
    path = REPO / doc
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve()
        assert resolved.is_file(), f"{doc} links to {target}: no such file"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", resolved.read_text(encoding="utf-8"), re.M)
            from markdown.extensions.toc import slugify

            assert anchor in {slugify(h, "-") for h in headings}, f"{doc} links to {target}: no such heading"


def test_architecture_is_a_one_page_map():
    text = (DOCS / "ARCHITECTURE.md").read_text(encoding="utf-8")
    size = len(text.encode())
    assert size <= MAP_MAX, f"docs/ARCHITECTURE.md is {size} bytes; the detail goes to docs/architecture/"
    assert "## Layers" in text and "### Where to put a change" in text and "## Data flow" in text
    rooms = set(re.findall(r"\]\((architecture/[\w-]+\.md)\)", text))
    assert rooms == {f"architecture/{p.name}" for p in (DOCS / "architecture").glob("*.md")}  # every room page, linked


def guide_names() -> set[str]:
    """Dotted names of lanenb / lanenb_trainer that the guide's pages import, call or name in
    code: ``from M import a, b`` (in code, comments or prose), ``alias.f(`` after ``import M as
    alias``, ``lanenb.x.f(``, and a code span that is a whole dotted name."""
    names: set[str] = set()
    pages = [*(DOCS / "guide").glob("*.md"), DOCS / "getting-started.md", DOCS / "index.md"]
    for md in pages:
        text = md.read_text(encoding="utf-8")
        for module, imported in IMPORT_FROM.findall(text):
            names |= {f"{module}.{n.strip()}" for n in imported.split(",") if re.fullmatch(r"\w+", n.strip())}
        for module, alias in IMPORT_AS.findall(text):
            names |= {f"{module}.{attr}" for attr in re.findall(rf"\b{alias}\.(\w+)\(", text)}
        names |= set(DOTTED_CALL.findall(text))
        names |= set(DOTTED_SPAN.findall(text)) - NOT_NAMES
    return names


def resolve(dotted: str) -> object:
    """The object a dotted name means to a reader: the attribute of the shortest importable
    prefix that has it (``lanenb.sweeps.sweep`` is the function the package exports, not the
    module of the same name)."""
    parts = dotted.split(".")
    for cut in range(1, len(parts) + 1):
        obj: object = importlib.import_module(".".join(parts[:cut]))
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            continue
        return obj
    raise AssertionError(f"{dotted}: no such name")


def test_every_public_name_the_guide_uses_is_in_the_api_reference(site):
    ids = set()
    for html in (site / "reference" / "api").rglob("*.html"):
        ids |= set(re.findall(r'id="((?:lanenb|lanenb_trainer)\.[\w.]+)"', html.read_text(encoding="utf-8")))
    used = guide_names()
    assert {"lanenb.jobs.TrainSpec", "lanenb.notebook.TrainPanel", "lanenb.predict"} <= used  # the reader works
    missing = []
    for name in sorted(used):
        obj = resolve(name)  # a name the guide uses that does not exist fails here
        if inspect.ismodule(obj):
            continue
        canonical = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
        if name not in ids and canonical not in ids:
            missing.append(f"{name} ({canonical})")
    assert not missing, "used in docs/guide/ but not in docs/reference/api/:\n" + "\n".join(missing)


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "scripts" / "docs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_cli_command_is_on_the_cli_page():
    from lanenb.cli import build_parser

    hooks = load_hooks()
    table = (DOCS / "guide" / "cli.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(lanenb [\w -]+)` \|", table, re.M))
    lines = [line for line, _ in hooks.commands(build_parser())]
    leaves = {line for line in lines if not any(other.startswith(line + " ") for other in lines)}
    assert leaves - {"lanenb"} == listed, f"not on the CLI page: {leaves - listed}; gone: {listed - leaves}"


def cells(path: Path) -> list[tuple[str, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb")))
def test_the_site_shows_every_notebook_with_its_current_cells(name):
    copy = DOCS / "notebooks" / name
    assert copy.is_file(), f"docs/notebooks/{name} is missing: python3 scripts/docs_notebooks.py"
    assert cells(copy) == cells(REPO / "notebooks" / name), (
        f"notebooks/{name} changed since its docs copy was executed: python3 scripts/docs_notebooks.py")


def test_the_executed_quickstart_shows_a_run_that_learned():
    nb = json.loads((DOCS / "notebooks" / "01-quickstart.ipynb").read_text(encoding="utf-8"))
    text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []))
    accuracy = float(re.search(r"test accuracy (\d\.\d+)", text).group(1))
    assert "succeeded" in text and accuracy > 0.8  # the README's picture is this run's charts
    assert (DOCS / "images" / "quickstart-run.png").read_bytes().startswith(b"\x89PNG")
