"""A ``lanenb.tables.Table`` shows itself wherever IPython shows an object (returned from a cell,
``display()``-ed, updated in place): its HTML in JupyterLab, its aligned text in a console; never
the dataclass's field dump ``Table(columns=[...], rows=[...])``."""

from __future__ import annotations

from IPython.core.formatters import DisplayFormatter
from IPython.utils.capture import capture_output

from lanenb.tables import Table

TABLE = Table(["trial", "lr"], [["0 *", "0.01"], ["1", "0.003"]], title="sweep s: finished", note="* the best")


def test_a_table_formats_as_html_and_aligned_text():
    data, _ = DisplayFormatter().format(TABLE)
    assert "<table>" in data["text/html"] and "<b>sweep s: finished</b>" in data["text/html"]
    assert data["text/plain"] == "sweep s: finished\ntrial  lr\n0 *    0.01\n1      0.003\n* the best"


def test_an_empty_table_formats_as_its_empty_line():
    data, _ = DisplayFormatter().format(Table([], [], empty="(no trial yet)"))
    assert data["text/html"] == "<i>(no trial yet)</i>" and data["text/plain"] == "(no trial yet)"


def test_a_tables_repr_is_its_text_not_its_fields():
    assert repr(TABLE) == TABLE.text() and "Table(columns" not in repr(Table([], []))
    assert TABLE._repr_html_() == TABLE.html()


def test_a_table_with_a_picture_carries_it_in_its_bundle():
    data, _ = DisplayFormatter().format(Table(["a"], [["1"]], png=b"\x89PNG\r\n\x1a\n"))
    assert data["image/png"] == "iVBORw0KGgo=" and "data:image/png;base64," in data["text/html"]


def test_a_table_displayed_and_updated_in_the_shell_is_html(ip):
    from IPython.display import display

    with capture_output(stdout=False, stderr=False) as shown:
        handle = display(TABLE, display_id=True)
        handle.update(Table([], [], empty="nothing"))
    first, update = shown.outputs
    assert "<table>" in first.data["text/html"] and not first.update
    assert update.update and update.data == {"text/html": "<i>nothing</i>", "text/plain": "nothing"}
    assert update.transient["display_id"] == first.transient["display_id"]
