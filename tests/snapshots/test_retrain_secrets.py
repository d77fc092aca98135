"""Issue 31, finding 5: the registry keeps no secret value, so "retrain from this snapshot" must
ask for the run's secrets again instead of submitting the text ``<redacted>`` as a token."""

from __future__ import annotations

from pathlib import Path

import pytest

import lanenb
from lanenb.contract.redact import REDACTED
from lanenb.contract.spec import TrainSpec
from lanenb.jobs import list_jobs
from lanenb.registry.jobs import JobRegistry
from lanenb.snapshots import SnapshotInputError, create
from lanenb.workflows.retrain import with_secrets

TOKEN = "wandb-0123456789abcdef"


@pytest.fixture
def recorded(tmp_path: Path, restic_installed):
    """A run record whose env held a secret (as ``submit`` stores it) and its dataset snapshot."""
    data = tmp_path / "tusimple"
    data.mkdir()
    (data / "label_data_0313.json").write_text("")
    spec = TrainSpec(dataset=str(data), processes=1, name="lane-orig",
                     env={"WANDB_API_KEY": TOKEN, "HTTPS_PROXY": "http://me:pr0xy-pass@proxy:3128", "X": "1"})
    JobRegistry().add("lane-orig", "local", spec.to_dict(), str(tmp_path / "run"), state="succeeded")
    return create(str(data), labels={"job": "lane-orig", "role": "dataset"})


def test_retrain_asks_for_the_runs_secrets_instead_of_submitting_redacted(recorded, tmp_path):
    target = tmp_path / "tusimple-v2"
    with pytest.raises(SnapshotInputError) as err:
        lanenb.retrain(recorded.id, str(target))
    text = str(err.value)
    assert "env.HTTPS_PROXY" in text and "env.WANDB_API_KEY" in text and "secrets={" in text
    assert not target.exists() and [j.name for j in list_jobs()] == ["lane-orig"]  # nothing restored or submitted


def test_secrets_given_again_replace_the_redacted_values():
    base = TrainSpec(dataset="/d", processes=1, env={"WANDB_API_KEY": REDACTED, "X": "1"})
    spec = with_secrets(base, {"WANDB_API_KEY": TOKEN}, "lane-orig")
    assert spec.env == {"WANDB_API_KEY": TOKEN, "X": "1"}
    with pytest.raises(SnapshotInputError, match=r"env\.WANDB_API_KEY.*secrets=\{'WANDB_API_KEY': \.\.\.\}"):
        with_secrets(base, None, "lane-orig")
