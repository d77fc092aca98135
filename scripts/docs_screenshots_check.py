"""The docs' pictures show a run that learned: scripts/docs_screenshots.sh asks this before it
copies live-view.png and lab-sidebar.png into docs/images, and saves nothing when the run's
headline test accuracy (best.pt's, else the last model's: ``lanenb.analysis.headline``) is
below 0.9, the quickstart recipe's level (0.946 on 2 CPU cores). A picture of a flat loss and
0.0 accuracy tells a reader the tool does not work.

    python3 scripts/docs_screenshots_check.py RUN_DIR [--floor 0.9]   # exit 0: save; 1: do not
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lanenb.analysis.headline import Headline, from_metrics
from lanenb.errors import UserError

FLOOR = 0.9


class RunDidNotLearnError(UserError, ValueError):
    """The screenshot run's test accuracy is below the floor, or it wrote none: no pictures."""


def learned(run_dir: Path, floor: float = FLOOR) -> Headline:
    """The headline of the run in ``run_dir`` (its ``metrics.json``) when its test accuracy is at
    least ``floor``.

    Raises:
        RunDidNotLearnError: no readable ``metrics.json``, no test figure in it, or an accuracy
            below ``floor`` (the message names the accuracy, its model and the floor).
    """
    path = Path(run_dir) / "metrics.json"
    try:
        metrics = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDidNotLearnError(f"{path} is missing: the run wrote no test metrics (did it finish?)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise RunDidNotLearnError(f"{path} cannot be read: {exc}") from exc
    found = from_metrics(metrics)
    if found is None or found.accuracy is None:
        raise RunDidNotLearnError(f"{path} holds no test accuracy (keys: {', '.join(sorted(metrics)) or 'none'})")
    if found.accuracy < floor:
        raise RunDidNotLearnError(
            f"test accuracy {found.accuracy:.4f} ({found.label}) is below {floor}: the run did not learn, "
            f"so its pictures were not saved ({path})")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="the screenshot run's directory (holds metrics.json)")
    parser.add_argument("--floor", type=float, default=FLOOR, help=f"least test accuracy (default {FLOOR})")
    args = parser.parse_args(argv)
    try:
        found = learned(args.run_dir, args.floor)
    except RunDidNotLearnError as exc:
        print(f"docs_screenshots: refusing: {exc}", file=sys.stderr)
        return 1
    print(f"docs_screenshots: the run learned: {found.text()} (at least {args.floor})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
