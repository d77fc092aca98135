"""The shared redaction rule: secret-looking env names never show their values."""

from __future__ import annotations

import pytest

from lanenb.contract.redact import (
    REDACTED,
    is_secret_name,
    redact_env,
    redact_env_list,
    redact_spec,
    redact_text,
)


@pytest.mark.parametrize("name", ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "db_password", "WANDB_API_KEY",
                                  "GIT_AUTH", "SSH_PRIVATE", "MY_CREDENTIALS"])
def test_secret_looking_names_are_secret(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["OMP_NUM_THREADS", "BATCH_SIZE", "NCCL_DEBUG", "LANE_TEST"])
def test_ordinary_names_are_not(name):
    assert not is_secret_name(name)


def test_redact_env_hides_secret_values_and_keeps_the_rest_and_references():
    env = {"HF_TOKEN": "hf_abcdef", "BATCH_SIZE": "8", "API_KEY": "secret:creds/api", "EMPTY_TOKEN": ""}
    assert redact_env(env) == {"HF_TOKEN": REDACTED, "BATCH_SIZE": "8", "API_KEY": "secret:creds/api",
                               "EMPTY_TOKEN": ""}
    assert env["HF_TOKEN"] == "hf_abcdef"  # a copy: the caller's env still launches the ranks


def test_redact_env_list_keeps_value_from_entries():
    env = [{"name": "DB_PASSWORD", "value": "hunter22"}, {"name": "X", "value": "1"},
           {"name": "S3_KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "key"}}}]
    assert redact_env_list(env) == [{"name": "DB_PASSWORD", "value": REDACTED}, {"name": "X", "value": "1"},
                                    {"name": "S3_KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "key"}}}]


def test_redact_spec_and_text():
    spec = {"dataset": "/d", "env": {"WANDB_API_KEY": "0123456789"}}
    assert redact_spec(spec)["env"] == {"WANDB_API_KEY": REDACTED}
    assert redact_text("login with 0123456789 ok", spec["env"]) == f"login with {REDACTED} ok"
