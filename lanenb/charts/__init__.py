"""Charts of runs, scaling reports and comparisons. One module per renderer: ``png.py``
draws them as PNG bytes with matplotlib's object API (the live view's images, the static image
headless runs keep, the reports' ``_repr_png_``). Takes plain data (a ``RunState``, a report),
knows no jobs; add a chart here and call it from the view that shows it."""
