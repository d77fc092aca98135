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


# ---------------------------------------------------------------------- secrets by shape (issue 31, 10)
@pytest.mark.parametrize(("name", "value", "shown"), [
    ("HTTPS_PROXY", "http://bob:hunter22@proxy.corp:3128", f"http://bob:{REDACTED}@proxy.corp:3128"),
    ("DATABASE_URL", "postgres://app:pa55w0rd@db:5432/lanes", f"postgres://app:{REDACTED}@db:5432/lanes"),
    ("MLFLOW_TRACKING_URI", "https://me:tok3n-xyz@mlflow.example.com", f"https://me:{REDACTED}@mlflow.example.com"),
    ("REPO", "https://ghp_0123456789abcdefghij0123456789abcdef@github.com/o/r",
     f"https://{REDACTED}@github.com/o/r"),
    ("DATA_URL", ("https://b.s3.amazonaws.com/t.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
                  "AKIAIOSFODNN7EXAMPLE%2F20240101&X-Amz-Signature=9f8e7d6c5b4a"),
     ("https://b.s3.amazonaws.com/t.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256"
      f"&X-Amz-Credential={REDACTED}&X-Amz-Signature={REDACTED}")),
    ("SAS_URL", "https://acct.blob.core.windows.net/c/t.zip?sv=2022-11-02&se=2030-01-01&sp=r&sig=Ab%2Bcd%3D",
     f"https://acct.blob.core.windows.net/c/t.zip?sv=2022-11-02&se=2030-01-01&sp=r&sig={REDACTED}"),
    ("NOTE", "key AKIAIOSFODNN7EXAMPLE here", f"key {REDACTED} here"),
    ("NOTE", "hf_" + "a1" * 17, REDACTED),
    ("NOTE", "sk-proj-" + "Z9" * 12, REDACTED),
    ("HDR", "Bearer eyJhbGciOiJIUzI1NiJ9.payload", f"Bearer {REDACTED}"),
])
def test_credentials_inside_values_are_redacted_whatever_the_variable_is_called(name, value, shown):
    assert redact_env({name: value}) == {name: shown}
    assert redact_text(f"rank 0: {value} done") == f"rank 0: {shown} done"


@pytest.mark.parametrize("value", ["http://proxy.corp:3128", "https://tusimple.example.com/train_set.zip?part=1",
                                   "ssh://git@github.com/o/r", "step 10 loss 0.31 lr=0.01", "/data/tusimple",
                                   "Basic configuration loaded", "token embeddings 512"])
def test_ordinary_values_keep_their_text(value):
    assert redact_env({"X": value}) == {"X": value}
    assert redact_text(value) == value


def test_fetch_urls_and_mirrors_are_stored_without_their_tokens():
    presigned = "https://b.s3.amazonaws.com/t.zip?X-Amz-Signature=abcdef0123456789"
    spec = {"dataset": "tusimple", "urls": [f"train_set.zip={presigned}"],
            "mirrors": ["https://user:mirr0rpass@mirror.example.com/tusimple/"], "env": {}}
    stored = redact_spec(spec)
    assert stored["urls"] == [f"train_set.zip=https://b.s3.amazonaws.com/t.zip?X-Amz-Signature={REDACTED}"]
    assert stored["mirrors"] == [f"https://user:{REDACTED}@mirror.example.com/tusimple/"]
    assert spec["urls"] == [f"train_set.zip={presigned}"]  # a copy: the fetcher still gets the real URL


# ---------------------------------------------------------------------- fingerprints (issue 31, 1)
def test_a_secret_is_redacted_by_any_reader_from_its_fingerprint_alone(lanenb_home):
    from lanenb.contract.redact import Fingerprints, remember_secrets

    secret = "s3cr3t-Value-42!"
    assert remember_secrets({"env": {"WANDB_API_KEY": secret, "X": "1"}}) == 1
    reader = Fingerprints(lanenb_home / "secrets")  # what another kernel starts from: the files only
    assert reader.spans(f"login {secret}, ok") == [(6, 6 + len(secret))]
    assert redact_text(f"wandb: login with {secret}!") == f"wandb: login with {REDACTED}!"
    assert redact_text("wandb: login with s3cr3t-Value-43!") == "wandb: login with s3cr3t-Value-43!"
    for path in (lanenb_home / "secrets").iterdir():
        assert secret.encode() not in path.read_bytes()
        assert path.stat().st_mode & 0o777 == 0o600
    assert (lanenb_home / "secrets").stat().st_mode & 0o777 == 0o700


def test_secret_spans_merge_overlapping_values(lanenb_home):
    from lanenb.contract.redact import remember_secrets

    remember_secrets({"env": {"A_TOKEN": "abcdefgh", "B_TOKEN": "efghijkl"}})
    assert redact_text("x abcdefghijkl y") == f"x {REDACTED} y"
