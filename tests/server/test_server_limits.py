"""What one client cannot do to the server: ask for unbounded work (``limit``), grow its
caches without end, keep a long poll polling after it left, or take the threads Jupyter's own
handlers share; a bad query parameter is a 4xx that names it and its value."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from load_jobs import record_job
from server_support import body_of
from tornado.httpclient import HTTPClientError

from lanenb.server import api


async def _refused(fetch, *parts, **kwargs) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as err:
        await fetch(*parts, **kwargs)
    return err.value.code, json.loads(err.value.response.body)["message"]


@pytest.mark.parametrize("parts, params, message", [
    (("jobs",), {"limit": "100000"}, "limit=100000: must be an integer from 1 to 500"),
    (("jobs",), {"limit": "501"}, "limit=501: must be an integer from 1 to 500"),
    (("jobs",), {"limit": "1e9"}, "limit='1e9': must be an integer"),
    (("snapshots",), {"namespace": "team-a"}, ("namespace='team-a': the 'local' snapshot store has no namespaces "
                                               "(the stores that take one: csi, kubernetes)")),
    (("snapshots", "diff"), {"a": "1", "b": "2", "namespace": "x"}, "namespace='x'"),
    (("snapshots",), {"backend": "nope"}, "unknown snapshot store 'nope'"),
])
async def test_bad_query_parameters_are_a_400_naming_the_parameter_and_value(jp_fetch, parts, params, message):
    code, text = await _refused(jp_fetch, "lanenb", *parts, params=params)
    assert code == 400 and message in text


@pytest.mark.parametrize("body, message", [
    ({"new_volume": "x", "namespace": "team-a"}, "namespace='team-a': the 'local' snapshot store has no namespaces"),
    ({"new_volume": "x", "backend": ["local"]}, "backend=['local']: must be the name of a snapshot store"),
    ({"new_volume": "pvc", "backend": "kubernetes", "namespace": 7}, "namespace=7: must be a Kubernetes namespace"),
])
async def test_bad_restore_fields_are_a_400_naming_the_field_and_value(jp_fetch, jp_root_dir, body, message):
    code, text = await _refused(jp_fetch, "lanenb", "snapshots", "abc123", "restore", method="POST",
                                body=json.dumps(body))
    assert code == 400 and message in text
    assert list(jp_root_dir.iterdir()) == []


async def test_list_readings_kept_are_bounded_whatever_limits_clients_ask(jp_fetch, lanenb_home):
    record_job(lanenb_home, "done", state="succeeded", running_here=False)
    for limit in range(1, 3 * api.LIST_KEPT):
        assert [j["name"] for j in body_of(await jp_fetch("lanenb", "jobs", params={"limit": str(limit)}))["jobs"]] \
            == ["done"]
    assert len(api._LIST_CACHE) <= api.LIST_KEPT and len(api._LIST_STAMPS) <= api.LIST_KEPT
    assert set(api._LIST_STAMPS) <= set(api._LIST_CACHE)


async def test_a_long_poll_stops_polling_when_its_client_goes(jp_serverapp, http_server_client, jp_http_port,
                                                             jp_base_url, lanenb_home, monkeypatch):
    record_job(lanenb_home, "quiet")  # running (its supervisor is this process) and printing nothing
    calls: list[float] = []
    real = api.job_updates

    def counting(*args, **kwargs):
        calls.append(time.monotonic())
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "job_updates", counting)
    reader, writer = await asyncio.open_connection("127.0.0.1", jp_http_port)
    writer.write((f"GET {jp_base_url}lanenb/jobs/quiet/updates?wait=20&tail=0 HTTP/1.1\r\n"
                  f"Host: 127.0.0.1:{jp_http_port}\r\n"
                  f"Authorization: token {jp_serverapp.identity_provider.token}\r\n\r\n").encode())
    await writer.drain()
    deadline = time.monotonic() + 15
    while len(calls) < 3:  # polling: the job has nothing new
        assert time.monotonic() < deadline and not reader.at_eof(), "the long poll never started"
        await asyncio.sleep(0.1)
    writer.close()  # the tab is closed
    await asyncio.sleep(1.0)
    after_close = len(calls)
    await asyncio.sleep(2.0)
    assert len(calls) == after_close, "the poll went on asking the feed after its client left"


async def _raw_get(port: int, path: str, token: str) -> tuple[int, bytes]:
    """A GET over a plain socket to 127.0.0.1: no name lookup, which tornado's HTTP client would
    run on the very default executor this test holds."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: token {token}\r\n"
                  "Connection: close\r\n\r\n").encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_lanenb_answers_while_the_servers_default_executor_is_busy(jp_serverapp, http_server_client,
                                                                        jp_http_port, jp_base_url, lanenb_home):
    """Blocking calls run on lanenb's own pool: Jupyter's default executor (here one thread,
    held by someone else's blocking wait) is neither needed nor taken."""
    record_job(lanenb_home, "done", state="succeeded", running_here=False)
    loop = asyncio.get_running_loop()
    default = ThreadPoolExecutor(1, thread_name_prefix="jupyter-default")
    loop.set_default_executor(default)
    release = threading.Event()
    held = loop.run_in_executor(None, release.wait, 30)
    try:
        code, body = await asyncio.wait_for(
            _raw_get(jp_http_port, f"{jp_base_url}lanenb/jobs", jp_serverapp.identity_provider.token), 10)
        assert code == 200 and [j["name"] for j in json.loads(body)["jobs"]] == ["done"]
    finally:
        release.set()
        await held
        default.shutdown(wait=True)
