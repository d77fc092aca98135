"""Issue 31, finding 3 on AzureML: a command job's environment variables are stored in clear in
the job definition and AzureML has no Secret reference to put in their place, so a literal
secret is refused before anything is recorded or sent, naming the variable, never its value."""

from __future__ import annotations

import pytest
from azureml_replay import WORKSPACE

from lanenb.backends.azureml.backend import AzureMLBackend
from lanenb.contract.spec import TrainSpec
from lanenb.errors import SpecError
from lanenb.jobs import list_jobs, submit

TOKEN = "hf_" + "azureSecretValue0123456789ab"


def make_spec(**env: str) -> TrainSpec:
    return TrainSpec(dataset="azureml:tusimple:1", backend="azureml", name="lane-az-secret", processes=2,
                     env={"LANE_NOTE": "kept", **env}, azureml=dict(compute="gpu-cluster", **WORKSPACE))


@pytest.mark.parametrize(("env", "named"), [
    ({"HF_TOKEN": TOKEN}, "HF_TOKEN"),
    ({"HTTPS_PROXY": "http://me:pr0xy-pass@proxy:3128"}, "HTTPS_PROXY"),
    ({"DATA_URL": "https://a.blob.core.windows.net/c/t.zip?sv=2022&sig=abcdefABCDEF"}, "DATA_URL"),
])
def test_a_literal_secret_is_refused_naming_the_variable_and_the_fix(env, named):
    with pytest.raises(SpecError, match=f"{named}=<redacted>.*Key Vault") as err:
        AzureMLBackend().validate(make_spec(**env))
    assert all(value not in str(err.value) for value in env.values())
    with pytest.raises(SpecError, match=named):
        submit(make_spec(**env))  # jobs.submit validates first: nothing recorded, nothing sent
    assert list_jobs() == []


def test_ordinary_variables_pass():
    AzureMLBackend().validate(make_spec(NCCL_DEBUG="INFO"))


def test_a_dataset_uri_with_a_sas_token_is_refused_without_repeating_it():
    """Issue 43: ``--data https://...?sig=...`` would be sent to the workspace and kept there in clear."""
    sas = "https://a.blob.core.windows.net/c/tusimple?sv=2022-11-02&sig=abcdefABCDEF0123456789"
    with pytest.raises(SpecError, match=r"dataset=.*<redacted>.*carries a credential.*azureml:NAME:VERSION") as err:
        TrainSpec(dataset=sas, backend="azureml", processes=2, azureml=dict(compute="gpu-cluster", **WORKSPACE))
    assert "abcdefABCDEF0123456789" not in str(err.value)
    assert list_jobs() == []
