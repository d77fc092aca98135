"""Jupyter server's rules hold for the lanenb API: authentication on every route, XSRF on POST
for cookie/browser requests, and every route under the server's base_url (``/a@b/`` is
pytest-jupyter's default prefix; JupyterHub's ``/user/<name>/`` is tested here too)."""

from __future__ import annotations

import json
import urllib.parse

import pytest
from server_support import body_of
from tornado.httpclient import HTTPClientError

ROUTES = [("GET", "lanenb/jobs"), ("GET", "lanenb/jobs/x"), ("GET", "lanenb/jobs/x/updates"),
          ("GET", "lanenb/jobs/x/metrics"), ("POST", "lanenb/jobs/x/stop"), ("GET", "lanenb/snapshots"),
          ("GET", "lanenb/snapshots/diff?a=1&b=2"), ("POST", "lanenb/snapshots/x/restore"), ("GET", "lanenb/sweeps"),
          ("GET", "lanenb/sweeps/x"), ("POST", "lanenb/sweeps/x/stop")]


@pytest.mark.parametrize("method, path", ROUTES)
async def test_every_route_refuses_requests_without_credentials(jp_serverapp, http_server_client, jp_base_url,
                                                               method, path):
    with pytest.raises(HTTPClientError) as err:
        await http_server_client.fetch(jp_base_url + path, method=method,
                                       body=b"{}" if method == "POST" else None)
    assert err.value.code == 403


async def test_routes_live_under_the_base_url_only(jp_fetch, jp_base_url, jp_serverapp, http_server_client):
    assert jp_base_url == "/a%40b/"
    assert body_of(await jp_fetch("lanenb", "jobs")) == {"jobs": []}
    token = jp_serverapp.identity_provider.token
    with pytest.raises(HTTPClientError) as err:  # the same path without the prefix is not ours
        await http_server_client.fetch("/lanenb/jobs", headers={"Authorization": f"token {token}"})
    assert err.value.code == 404


class TestJupyterHubPrefix:
    @pytest.fixture
    def jp_base_url(self) -> str:
        return "/user/alice/"

    async def test_jobs_answer_under_the_hub_user_prefix(self, jp_fetch, jp_serverapp):
        assert jp_serverapp.base_url == "/user/alice/"
        assert body_of(await jp_fetch("lanenb", "jobs")) == {"jobs": []}
        assert body_of(await jp_fetch("lanenb", "snapshots")) == {"snapshots": []}


async def _browser_login(client, base_url: str, token: str) -> str:
    """Log in as a browser does (the login form with the token as password); returns the
    cookies of the session, the login cookie and the ``_xsrf`` cookie."""
    page = await client.fetch(base_url + "login", raise_error=False)
    xsrf_cookie = next(c.split(";")[0] for c in page.headers.get_list("Set-Cookie") if c.startswith("_xsrf="))
    xsrf = xsrf_cookie.split("=", 1)[1]
    reply = await client.fetch(base_url + "login", method="POST", follow_redirects=False, raise_error=False,
                               body=urllib.parse.urlencode({"_xsrf": xsrf, "password": token}),
                               headers={"Cookie": xsrf_cookie})
    assert reply.code == 302, reply.body
    login = [c.split(";")[0] for c in reply.headers.get_list("Set-Cookie") if not c.startswith("_xsrf=")]
    return "; ".join(login + [xsrf_cookie])


async def test_browser_post_without_the_xsrf_token_is_refused(jp_serverapp, http_server_client, jp_base_url):
    """A logged-in browser's cookie alone cannot stop a job (a cross-site form could send it);
    with Jupyter's ``_xsrf`` token as well the request goes through (to a 404: no such job)."""
    cookies = await _browser_login(http_server_client, jp_base_url, jp_serverapp.identity_provider.token)
    assert body_of(await http_server_client.fetch(jp_base_url + "lanenb/jobs", headers={"Cookie": cookies})) \
        == {"jobs": []}
    stop = jp_base_url + "lanenb/jobs/nope/stop"
    body = json.dumps({"confirm": "nope"})
    with pytest.raises(HTTPClientError) as err:
        await http_server_client.fetch(stop, method="POST", body=body, headers={"Cookie": cookies})
    assert err.value.code == 403 and "_xsrf" in json.loads(err.value.response.body)["message"]
    xsrf = cookies.split("_xsrf=", 1)[1]
    with pytest.raises(HTTPClientError) as err:
        await http_server_client.fetch(stop, method="POST", body=body,
                                       headers={"Cookie": cookies, "X-XSRFToken": xsrf})
    assert err.value.code == 404 and "nope" in json.loads(err.value.response.body)["message"]
