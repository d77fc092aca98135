"""Recorded HTTP for the azureml backend: the SDK's real code runs down to the socket.

``ReplayAdapter`` is a ``requests`` transport adapter mounted on the session of azure-core's own
``RequestsTransport``, which ``MLClient`` uses for every pipeline (ARM, run history, log files).
It answers each request with the next recorded exchange of a JSON file in
``tests/azureml/recordings/`` and fails on anything unexpected: another method, URL (path and
query, ``api-version`` included) or
JSON body than recorded, or a request after the recording has run out. ``FakeCredential`` is the
only stand-in: a TokenCredential that hands out a fixed token, so no sign-in is attempted.

Recording file::

    {"source": "where the shapes come from",
     "interactions": [{"request": {"method": "GET", "url": "https://...", "json": {...},
                                   "headers": {"Range": "bytes=10-"}},
                       "response": {"status": 200, "headers": {...}, "json": {...} | "text": "..."}}]}

``{job}`` in URLs, bodies and responses is replaced by the job name a test chose.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
from requests.adapters import BaseAdapter

RECORDINGS = Path(__file__).parent.parent / "azureml" / "recordings"
# the workspace every recording talks to
WORKSPACE = {"subscription_id": "00000000-1111-2222-3333-444444444444", "resource_group": "lanes-rg",
             "workspace": "lanes-ws"}
# properties the SDK adds from the caller's git checkout (azureml.git.*, mlflow.source.git.*):
# they differ per commit, so they are left out of the body comparison
_GIT_PREFIXES = ("azureml.git.", "mlflow.source.git.")


class FakeCredential:
    """A TokenCredential (``get_token``/``get_token_info``) with a fixed, never-real token."""

    token = "fake-token-for-recorded-tests"

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self.token, int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> Any:
        from azure.core.credentials import AccessTokenInfo

        return AccessTokenInfo(self.token, int(time.time()) + 3600)


def _substitute(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, name in names.items():
            value = value.replace("{" + key + "}", name)
        return value
    if isinstance(value, list):
        return [_substitute(v, names) for v in value]
    if isinstance(value, dict):
        return {_substitute(k, names): _substitute(v, names) for k, v in value.items()}
    return value


def _without_git(body: Any) -> Any:
    props = ((body or {}).get("properties") or {}).get("properties") if isinstance(body, dict) else None
    if isinstance(props, dict):
        for key in [k for k in props if k.startswith(_GIT_PREFIXES)]:
            del props[key]
    return body


def _split(url: str) -> tuple[str, dict[str, list[str]]]:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}", parse_qs(parts.query)


class ReplayAdapter(BaseAdapter):
    """Serves recorded exchanges in order; every difference is kept in ``problems``."""

    def __init__(self, *recordings: str, **names: str) -> None:
        super().__init__()
        self.pending: list[dict[str, Any]] = []
        for recording in recordings:
            data = json.loads((RECORDINGS / recording).read_text())
            self.pending += _substitute(data["interactions"], names)
        self.sent: list[tuple[str, str]] = []
        self.problems: list[str] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        method, url = str(request.method), str(request.url)
        self.sent.append((method, url))
        if not self.pending:
            return self._fail(f"unexpected request after the recording ended: {method} {url}")
        expected = self.pending.pop(0)
        want = expected["request"]
        if method != want["method"] or _split(url) != _split(want["url"]):
            return self._fail(f"expected {want['method']} {want['url']}, got {method} {url}")
        for header, value in (want.get("headers") or {}).items():
            if request.headers.get(header) != value:
                return self._fail(f"{method} {url}: header {header}: {request.headers.get(header)!r}, "
                                  f"recorded {value!r}")
        if "json" in want:
            body = request.body.decode() if isinstance(request.body, bytes) else request.body
            got = _without_git(json.loads(body or "null"))
            if got != want["json"]:
                return self._fail(f"{method} {url}: body differs from the recording:\n  got  {json.dumps(got)}"
                                  f"\n  want {json.dumps(want['json'])}")
        signed = request.headers.get("Authorization") == f"Bearer {FakeCredential.token}"
        if signed != wants_token(url):
            return self._fail(f"{method} {url}: {'sent' if signed else 'no'} bearer token from the credential")
        return self._response(request, expected["response"])

    def _fail(self, problem: str) -> requests.Response:
        self.problems.append(problem)
        raise AssertionError(problem)

    @staticmethod
    def _response(request: requests.PreparedRequest, spec: dict[str, Any]) -> requests.Response:
        if "json" in spec:
            payload, content_type = json.dumps(spec["json"]).encode(), "application/json; charset=utf-8"
        else:
            payload, content_type = spec.get("text", "").encode(), "text/plain; charset=utf-8"
        return http_response(request, spec.get("status", 200), payload, content_type, spec.get("headers"),
                             unknown_reason="Recorded")

    def close(self) -> None:
        return None

    def assert_done(self) -> None:
        """Every recorded exchange was asked for, and nothing else."""
        assert not self.problems, self.problems
        first = self.pending[0]["request"] if self.pending else {}
        assert not self.pending, (f"{len(self.pending)} recorded request(s) never sent, the first: "
                                  f"{first.get('method')} {first.get('url')}")


def wants_token(url: str) -> bool:
    """ARM and run-history calls carry the credential's token; the discovery document and the
    SAS-signed log files must never receive it."""
    return "/subscriptions/" in urlsplit(url).path


_REASONS = {200: "OK", 201: "Created", 202: "Accepted", 206: "Partial Content", 400: "Bad Request",
            401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 416: "Range Not Satisfiable"}


def http_response(request: requests.PreparedRequest, status: int, payload: bytes, content_type: str,
                  headers: dict[str, str] | None = None, *, unknown_reason: str) -> requests.Response:
    """The ``requests.Response`` a test transport answers ``request`` with (the replay's and the
    emulator's alike): ``payload`` as the body, its length and type in the headers."""
    response = requests.Response()
    response.status_code = status
    response.reason = _REASONS.get(status, unknown_reason)
    response.headers["Content-Type"] = content_type
    response.headers.update(headers or {})
    response.headers["Content-Length"] = str(len(payload))
    response.raw = io.BytesIO(payload)
    response.url = str(request.url)
    response.request = request
    return response


def transport(adapter: BaseAdapter) -> Any:
    """azure-core's own ``RequestsTransport`` over a session that ``adapter`` answers (a
    ``ReplayAdapter`` or the emulator)."""
    from azure.core.pipeline.transport import RequestsTransport

    session = requests.Session()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return RequestsTransport(session=session, session_owner=False)
