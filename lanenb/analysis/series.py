"""``BucketSeries``: a metric history whose memory stays bounded however long the run is.

Why min/max buckets and not LTTB: LTTB picks representative points of a *finished* series
and must see its neighbours; a live series grows at the end forever. Here each stored point
is a bucket of consecutive samples with its mean, min and max. When ``capacity`` buckets are
full, neighbouring pairs are merged, so the bucket width doubles and the series keeps
between ``capacity/2`` and ``capacity`` buckets: O(1) memory, the whole run always visible at
uniform resolution, spikes kept (the min/max band) even after a week of steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BucketSeries"]


@dataclass
class BucketSeries:
    """Append ``(x, y)`` samples in increasing ``x``; read back at most ``capacity`` points.

    Args:
        capacity: the most buckets kept (even, >= 4). Memory is about 5 floats per bucket.
    """

    capacity: int = 1024
    width: int = 1  # samples per full bucket
    count: int = 0  # samples seen (finite ones)
    nonfinite: int = 0  # NaN/inf/None samples skipped (a diverged loss)
    _x: list[float] = field(default_factory=list, repr=False)
    _sum: list[float] = field(default_factory=list, repr=False)
    _min: list[float] = field(default_factory=list, repr=False)
    _max: list[float] = field(default_factory=list, repr=False)
    _n: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.capacity, int) or self.capacity < 4 or self.capacity % 2:
            raise ValueError(f"capacity={self.capacity!r}: must be an even integer >= 4")

    def append(self, x: float, y: Any) -> None:
        if y is None or not isinstance(y, (int, float)) or not math.isfinite(y):
            self.nonfinite += 1
            return
        y = float(y)
        self.count += 1
        if len(self._n) >= self.capacity and self._n[-1] >= self.width:
            self._halve()  # the last bucket may now have room again
        if self._n and self._n[-1] < self.width:
            self._sum[-1] += y
            self._min[-1] = min(self._min[-1], y)
            self._max[-1] = max(self._max[-1], y)
            self._n[-1] += 1
            return
        self._x.append(float(x))
        self._sum.append(y)
        self._min.append(y)
        self._max.append(y)
        self._n.append(1)

    def _halve(self) -> None:
        """Merge neighbouring buckets pairwise: half the points, twice the width."""
        xs, sums, mins, maxs, ns = [], [], [], [], []
        for i in range(0, len(self._n) - 1, 2):
            xs.append(self._x[i])
            sums.append(self._sum[i] + self._sum[i + 1])
            mins.append(min(self._min[i], self._min[i + 1]))
            maxs.append(max(self._max[i], self._max[i + 1]))
            ns.append(self._n[i] + self._n[i + 1])
        if len(self._n) % 2:
            xs.append(self._x[-1])
            sums.append(self._sum[-1])
            mins.append(self._min[-1])
            maxs.append(self._max[-1])
            ns.append(self._n[-1])
        self._x, self._sum, self._min, self._max, self._n = xs, sums, mins, maxs, ns
        self.width *= 2

    def __len__(self) -> int:
        return len(self._n)

    @property
    def x(self) -> list[float]:
        return list(self._x)

    @property
    def y(self) -> list[float]:
        """Bucket means."""
        return [s / n for s, n in zip(self._sum, self._n)]

    @property
    def ymin(self) -> list[float]:
        return list(self._min)

    @property
    def ymax(self) -> list[float]:
        return list(self._max)

    @property
    def last(self) -> float | None:
        """Mean of the newest bucket (the latest value when ``width`` is 1)."""
        return self._sum[-1] / self._n[-1] if self._n else None

    def coarsened(self, limit: int) -> BucketSeries:
        """A copy with at most ``limit`` buckets (neighbours merged as ``append`` would): what a
        chart draws, whatever this series keeps.

        Raises:
            ValueError: ``limit`` is below 2.
        """
        if limit < 2:
            raise ValueError(f"limit={limit!r}: must be >= 2")
        out = BucketSeries(self.capacity, self.width, self.count, self.nonfinite, list(self._x), list(self._sum),
                           list(self._min), list(self._max), list(self._n))
        while len(out._n) > limit:
            out._halve()
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: what the sidebar and ``RunState.to_dict`` send."""
        return {"x": self.x, "y": self.y, "min": self.ymin, "max": self.ymax, "width": self.width,
                "count": self.count}
