"""/docs: the API reference, /openapi.json rendered in the reader's browser by Swagger UI.

Swagger UI's files are vendored in docs_assets/ (version and licence in its README.md) and
served by the node itself, so the page works with no network beyond the node: an operator's
machine without internet access, or a node behind a firewall, still shows the reference.
Every URL the page uses is relative (``docs/...``, ``openapi.json``), so a proxy that serves
the node under a path prefix serves the page whole. Open like /openapi.json (endpoints.py):
both describe the API, neither shows data; trying an operation from the page takes a token
(the Authorize button) where ``auth-tokens`` is set.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, send_file

from .endpoints import route
from .headers import csp_nonce

ASSETS = Path(__file__).parent / "docs_assets"
SWAGGER_UI_VERSION = "5.35.0"        # docs_assets/README.md: change both together
# The assets change only with the version, which their URLs carry (?v=): a browser keeps
# them a day and revalidates with the ETag after that.
ASSET_MAX_AGE_S = 86400

docs = Blueprint("docs", __name__)

# Where the answer's nonce goes: the Content-Security-Policy (headers.py) lets only the
# inline blocks carrying it run.
NONCE = "%CSP-NONCE%"
# validatorUrl null: Swagger UI's default would load a badge from a validator on the
# internet. persistAuthorization stays off: a token typed into Authorize is not kept in the
# browser's storage. The base layout, without the standalone preset's top bar (whose URL box
# would invite loading other documents).
PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>delayqueue API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="docs/swagger-ui.css?v={SWAGGER_UI_VERSION}">
<style nonce="{NONCE}">body {{ margin: 0; }}</style>
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js?v={SWAGGER_UI_VERSION}"></script>
<script nonce="{NONCE}">
window.ui = SwaggerUIBundle({{
  url: "openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  deepLinking: true,
  filter: true,
  validatorUrl: null,
  persistAuthorization: false,
  defaultModelsExpandDepth: 0,
}});
</script>
</body>
</html>
"""


@route(docs, "docs")
def page() -> Response:
    return Response(PAGE.replace(NONCE, csp_nonce()), mimetype="text/html")


def _asset(name: str, mimetype: str) -> Response:
    return send_file(ASSETS / name, mimetype=mimetype, max_age=ASSET_MAX_AGE_S,
                     conditional=True, etag=True)


@route(docs, "docsScript")
def script() -> Response:
    return _asset("swagger-ui-bundle.js", "text/javascript")


@route(docs, "docsStyle")
def style() -> Response:
    return _asset("swagger-ui.css", "text/css")
