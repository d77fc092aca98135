"""The ``DatasetPreview`` Fetch button: fills an absent folder with a progress bar, then previews it."""

from __future__ import annotations

from fetch_support import LoopbackServer

PNG = b"\x89PNG"


def test_fetch_button_downloads_then_shows_the_preview(server, tmp_path):
    from lanenb.notebook.dataset import DatasetPreview

    view = DatasetPreview(tmp_path / "tusimple", n=2, fetch="tusimple",
                          fetch_options={"mirrors": [server.url], "default_urls": False, "backoff": 0.0})
    assert view.children == (view.fetch_row,) and view.sizes == {}
    view.fetch_button.click()
    view.fetch_thread.join(60)
    assert view.fetch_bar.value == 1 and "tusimple fetched into" in view.fetch_status.value
    assert bytes(view.grid.value).startswith(PNG) and view.sizes["test"] > 0 and view.children[0] is view.fetch_row
    assert not view.fetch_button.disabled


def test_fetch_button_shows_the_error_and_can_be_pressed_again(tmp_path):
    from lanenb.notebook.dataset import DatasetPreview

    empty = LoopbackServer({}).start()
    try:
        view = DatasetPreview(tmp_path / "t", fetch="tusimple",
                              fetch_options={"mirrors": [empty.url], "default_urls": False, "parts": ["test"]})
        view.fetch_button.click()
        view.fetch_thread.join(60)
    finally:
        empty.stop()
    assert "color:var(--lanenb-error" in view.fetch_status.value and "not found at any URL" in view.fetch_status.value
    assert not view.fetch_button.disabled and view.children == (view.fetch_row,)
