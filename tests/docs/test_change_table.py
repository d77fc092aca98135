"""docs/ARCHITECTURE.md's change table ("Where to put a change") names files and symbols a
contributor edits: every path it names exists, and every symbol is in one of its row's files."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPAN = re.compile(r"`([^`]+)`")
PATH = re.compile(r"^[\w./-]+\.(py|md|ts)$")
SYMBOL = re.compile(r"^[A-Za-z_]\w*$")
NOT_SYMBOLS = {"TrainSpec"}  # named for the reader; checked below as a real class all the same


def rows() -> dict[str, list[str]]:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("### Where to put a change", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("change", "---"):
            out[cells[0]] = SPAN.findall(cells[1])
    return out


def test_the_table_has_a_row_for_each_kind_of_change():
    assert set(rows()) == {"backend (e.g. Slurm)", "chart", "event field", "trainer flag", "verdict kind",
                           "REST field", "REST route", "version"}


def test_every_path_and_symbol_the_table_names_exists():
    for change, spans in rows().items():
        paths = [s for s in spans if PATH.match(s)]
        assert paths, f"{change}: names no file"
        for path in paths:
            assert (REPO / path).is_file(), f"{change}: {path} does not exist"
        texts = [(REPO / p).read_text(encoding="utf-8") for p in paths]
        for symbol in (s for s in spans if SYMBOL.match(s) and s not in NOT_SYMBOLS):
            assert any(re.search(rf"\b{symbol}\b", t) for t in texts), f"{change}: {symbol} is in none of {paths}"
        for field in (s.split(".", 1)[1] for s in spans if s.startswith("TrainSpec.")):
            from lanenb.contract.spec import TrainSpec

            assert field in TrainSpec.__dataclass_fields__, f"{change}: TrainSpec.{field}"
