"""TuSimple data for the ranks: labels + validation, splits, masks, augmentation, dataset,
loader, synthetic scenes and previews. Imports only numpy, OpenCV, torch and tqdm."""

from .check import check_dataset
from .labels import LabelError, LaneRecord, Problem, read_label_file
from .loader import ResumableDistributedSampler, build_loader
from .masks import NUM_SLOTS, assign_slots
from .splits import find_label_files, load_split
from .tusimple import TuSimpleDataset

__all__ = [
    "LabelError",
    "LaneRecord",
    "Problem",
    "check_dataset",
    "read_label_file",
    "ResumableDistributedSampler",
    "build_loader",
    "NUM_SLOTS",
    "assign_slots",
    "find_label_files",
    "load_split",
    "TuSimpleDataset",
    "synthesize",
    "draw_lanes",
    "preview_grid",
]


def __getattr__(name: str):  # synth/preview load lazily: they are not needed in training
    if name == "synthesize":
        from .synth import synthesize

        return synthesize
    if name in ("draw_lanes", "preview_grid"):
        from . import preview

        return getattr(preview, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
