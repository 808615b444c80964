"""/docs: the API reference page, Swagger UI served by the node itself from /openapi.json.

In-process: the page refers only to the node's own routes, and the vendored assets are
served byte for byte with their content types and cache headers. In a real headless
Chromium (Debian's chromium + chromium-driver, as tests/http/test_console_browser.py) against
a real node with tokens on: the page opens without a token, shows one section per tag and
one entry per operation, offers the bearer token, logs no error, and no request the page
makes goes anywhere but the node. The screenshot is kept as <artefacts>/console/docs.png
(<artefacts> as in test_console_browser.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
import requests
from selenium.webdriver.common.by import By

from delayqueue.http.app import create_app
from delayqueue.http.docs_page import ASSET_MAX_AGE_S, ASSETS, SWAGGER_UI_VERSION
from delayqueue.http.openapi import TAGS, document

from support import wait_until
from support.browser import chromium
from support.node import REPO, ServerProcess

ARTIFACTS = Path(os.environ.get("CONSOLE_TEST_ARTIFACTS", REPO / "build" / "test-artifacts")
                 ) / "console"
ASSET_TYPES = {"/docs/swagger-ui-bundle.js": ("swagger-ui-bundle.js", "text/javascript"),
               "/docs/swagger-ui.css": ("swagger-ui.css", "text/css")}


@pytest.fixture(scope="module")
def http():
    app = create_app(overrides={"redis-url": "redis://127.0.0.1:1/0", "snapshot-dir": ""})
    return app.test_client()


def test_the_page_uses_only_relative_urls_that_are_routes_of_the_node(http):
    answer = http.get("/docs")
    assert answer.status_code == 200 and answer.mimetype == "text/html"
    html = answer.get_data(as_text=True)
    urls = re.findall(r'(?:src|href)="([^"]*)"', html) + re.findall(r'url: "([^"]*)"', html)
    assert sorted(urls) == sorted(["data:,", f"docs/swagger-ui.css?v={SWAGGER_UI_VERSION}",
                                   f"docs/swagger-ui-bundle.js?v={SWAGGER_UI_VERSION}",
                                   "openapi.json"])
    for url in urls:
        if url != "data:,":                  # relative to /docs: under the node's root
            assert http.get("/" + url).status_code == 200, url
    assert "validatorUrl: null" in html          # no badge from a validator on the internet


@pytest.mark.parametrize("path", ASSET_TYPES)
def test_an_asset_is_served_byte_for_byte_with_its_type_and_cache_headers(http, path):
    name, mimetype = ASSET_TYPES[path]
    answer = http.get(path, query_string={"v": SWAGGER_UI_VERSION})
    assert answer.status_code == 200 and answer.mimetype == mimetype
    assert answer.get_data() == (ASSETS / name).read_bytes()
    assert answer.headers["Cache-Control"] == f"public, max-age={ASSET_MAX_AGE_S}"
    again = http.get(path, headers={"If-None-Match": answer.headers["ETag"]})
    assert again.status_code == 304 and again.get_data() == b""


def test_the_vendored_files_are_the_ones_their_readme_names():
    readme = (ASSETS / "README.md").read_text(encoding="utf-8")
    assert f"| version | {SWAGGER_UI_VERSION} " in readme
    for name in ("swagger-ui-bundle.js", "swagger-ui.css"):
        digest = hashlib.sha256((ASSETS / name).read_bytes()).hexdigest()
        assert f"`{digest}  {name}`" in readme, name
    assert "Apache License" in (ASSETS / "LICENSE").read_text(encoding="utf-8")


# -- in a browser ----------------------------------------------------------------------------
TOKENS = [{"name": "admin", "secret": "docs-admin-secret-01", "roles": ["admin"]}]


@pytest.fixture(scope="module")
def node(redis_server):
    with redis_server.leased_db_url() as url, \
            ServerProcess(url, settings={"auth-tokens": json.dumps(TOKENS)}) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    # Names other than the node's address resolve to nothing: a request meant for the
    # internet fails here, and the check below still sees it.
    with chromium(["--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"],
                  logs=("browser", "performance")) as driver:
        yield driver


def test_a_real_node_sends_the_assets_whole_without_a_token_on_a_kept_alive_connection(node):
    # gunicorn hands a file answer to sendfile(2): its header block must go out before the
    # file (delayqueue/server/gunicorn_workers.py), and the connection stay in step after it.
    session = requests.Session()
    for path, (name, mimetype) in ASSET_TYPES.items():
        answer = session.get(node.url + path, timeout=10)
        assert answer.status_code == 200 and answer.headers["Content-Type"].startswith(mimetype)
        assert answer.content == (ASSETS / name).read_bytes()
        assert session.get(node.url + "/docs", timeout=10).status_code == 200
    head = session.head(node.url + "/docs/swagger-ui.css", timeout=10)
    assert head.status_code == 200 and head.content == b""
    assert session.get(node.url + "/openapi.json", timeout=10).json()["openapi"] == "3.1.0"


def requested_urls(driver) -> list[str]:
    """Every URL the page asked for since the last call (Chromium's network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def operation_count() -> int:
    return sum(len(ops) for ops in document()["paths"].values())


@pytest.mark.slow
def test_the_page_renders_every_operation_offline_in_headless_chromium(node, browser):
    browser.get(node.url + "/docs")
    wanted = operation_count()
    wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, ".opblock")) == wanted, 30,
               0.2, message=lambda: f"{len(browser.find_elements(By.CSS_SELECTOR, '.opblock'))}"
                                    f" of {wanted} operations shown")
    sections = [h.get_attribute("data-tag")
                for h in browser.find_elements(By.CSS_SELECTOR, "h3.opblock-tag")]
    assert sections == list(TAGS)
    summaries = {e.text for e in browser.find_elements(By.CSS_SELECTOR,
                                                       ".opblock-summary-description")}
    assert "Send up to 1000 messages to one topic in one request." in summaries
    assert browser.find_element(By.CSS_SELECTOR, ".info .title").text.startswith("delayqueue")
    # The bearer scheme: an Authorize button, and a lock on each operation that wants a token.
    assert browser.find_elements(By.CSS_SELECTOR, ".auth-wrapper .authorize")
    locked = browser.find_elements(By.CSS_SELECTOR, ".opblock .authorization__btn")
    assert len(locked) == sum(1 for ops in document()["paths"].values()
                              for op in ops.values() if "security" in op)

    urls = requested_urls(browser)
    assert f"{node.url}/openapi.json" in urls
    assert f"{node.url}/docs/swagger-ui-bundle.js?v={SWAGGER_UI_VERSION}" in urls
    leaving = [u for u in urls if not (u == node.url + "/docs" or u.startswith(node.url + "/")
                                       or u.startswith("data:"))]
    assert leaving == [], f"requests that leave the node: {leaving}"
    errors = [e["message"] for e in browser.get_log("browser")
              if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "docs.png").write_bytes(browser.get_screenshot_as_png())
