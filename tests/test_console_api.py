"""The console's server side on the whole app (`create_app`, an API key set, the keyword
engine of console_kit): the page and its files are served without the key and never carry
it; the catalog views need the key; the lint view names the nodes its findings concern."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_kit import BANK, KeywordEngine
from fastapi.testclient import TestClient
from stackroute.server.http.app import create_app
from stackroute.server.http.console.pages import public_paths, static_files
from stackroute.server.settings import ServerSettings

API_KEY = "console-api-test-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
LOOPBACK = "http://127.0.0.1"  # the DNS rebinding guard serves no "testserver" Host


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    folder = tmp_path_factory.mktemp("console-api")
    settings = ServerSettings(db=folder / "stackroute.db", catalogs=[], api_key=API_KEY,
                              leaf_isolation="thread", speculation="off")
    with TestClient(create_app(settings, engine=KeywordEngine()), base_url=LOOPBACK) as c:
        yield c


@pytest.fixture(scope="module")
def catalog_id(client: TestClient) -> str:
    r = client.post("/v1/catalogs", json=BANK, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_the_page_and_its_files_are_served_without_the_key(client: TestClient) -> None:
    page = client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert API_KEY not in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    # Every file the page loads is one the package ships, and each is served.
    loaded = re.findall(r'(?:src|href)="/ui/static/([^"]+)"', page.text)
    assert set(loaded) == {"console.css", "app.js"}
    for name in static_files():
        r = client.get(f"/ui/static/{name}")
        assert r.status_code == 200, name
        assert API_KEY not in r.text
    imports = {m for name in static_files() if name.endswith(".js") for m in re.findall(
        r'from "\./([^"]+)"', client.get(f"/ui/static/{name}").text)}
    assert imports <= set(static_files())  # no module loaded from elsewhere
    assert client.get("/ui/static/app.js").headers["content-type"].startswith(
        "text/javascript")


def test_only_the_shipped_files_are_public(client: TestClient) -> None:
    assert "/ui/static/app.js" in public_paths() and "/v1/catalogs" not in public_paths()
    missing = client.get("/ui/static/nothing.js")
    assert missing.status_code == 401  # not public: the key middleware answers first
    missing = client.get("/ui/static/nothing.js", headers=AUTH)
    assert missing.status_code == 404
    assert "no console file 'nothing.js'" in missing.json()["error"]["message"]
    assert client.get("/ui/static/..%2Fpages.py", headers=AUTH).status_code == 404


def test_the_catalog_views_need_the_key(client: TestClient, catalog_id: str) -> None:
    for path in (f"/v1/catalogs/{catalog_id}/tree", f"/v1/catalogs/{catalog_id}/lint"):
        r = client.get(path)
        assert r.status_code == 401, path
        assert r.json()["error"]["code"] == "invalid_api_key"


def test_the_tree_view(client: TestClient, catalog_id: str) -> None:
    tree = client.get(f"/v1/catalogs/{catalog_id}/tree", headers=AUTH).json()
    assert tree["path"] == "" and [c["name"] for c in tree["children"]] == ["payments",
                                                                             "weather"]
    send = tree["children"][0]["children"][0]
    assert send["path"] == "payments/send_money" and send["sensitive"] and send["is_leaf"]
    assert send["parameters"]["required"] == ["payee", "amount"]
    unknown = client.get("/v1/catalogs/nope/tree", headers=AUTH)
    assert unknown.status_code == 404 and "no catalog 'nope'" in unknown.json()["error"][
        "message"]


def test_the_lint_view_names_the_nodes(client: TestClient, catalog_id: str) -> None:
    """Without embeddings: identical descriptions are still found (by text)."""
    r = client.get(f"/v1/catalogs/{catalog_id}/lint", params={"embeddings": "false"},
                   headers=AUTH)
    assert r.status_code == 200, r.text
    lint = r.json()
    assert lint["embeddings_skipped"] == "not requested"
    duplicates = [w for w in lint["warnings"] if w["kind"] == "duplicate_leaves"]
    assert [w["paths"] for w in duplicates] == [["payments/send_money",
                                                 "payments/transfer_money"]]
    assert lint["by_kind"]["duplicate_leaves"]["total"] == 1
    bad = client.get(f"/v1/catalogs/{catalog_id}/lint", params={"embeddings": "maybe"},
                     headers=AUTH)
    assert bad.status_code == 422


def test_no_key_configured_means_no_login(tmp_path: Path) -> None:
    settings = ServerSettings(db=tmp_path / "s.db", catalogs=[], leaf_isolation="thread",
                              speculation="off")
    with TestClient(create_app(settings, engine=KeywordEngine()), base_url=LOOPBACK) as c:
        assert c.get("/ui").status_code == 200
        assert c.get("/v1/catalogs").status_code == 200
        assert c.get("/ui/", follow_redirects=False).headers["location"] == "/ui"
