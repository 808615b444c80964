"""The security headers every answer carries, and the console's and /docs' content policy.

Every answer, JSON, text or HTML: ``X-Content-Type-Options: nosniff`` (a browser takes the
declared type, never guesses HTML from a message body), ``X-Frame-Options: DENY`` (no page
of ours inside another site's frame: clickjacking of the console's buttons) and
``Referrer-Policy: same-origin`` (a console URL, which names topics and msgIds, is not sent
to other sites).

An HTML answer (the console's pages, /docs) also carries ``Content-Security-Policy``
(``POLICY``): scripts, styles and everything else from the node itself only, no plugins, no
``<base>``, forms posting only back to the node, and ``frame-ancestors 'none'`` (the
standard form of ``DENY``). The inline ``<script>`` and ``<style>`` blocks of our own pages
carry the answer's nonce (``csp_nonce()``, in templates ``{{ csp_nonce() }}``), which the
policy names; nothing else inline runs: no ``onclick=`` attributes, no ``style=``
attributes. Images may also be ``data:`` URLs (the pages' empty favicon, Swagger UI's
icons).
"""

from __future__ import annotations

import secrets

from flask import Flask, Response, g

COMMON = (("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
          ("Referrer-Policy", "same-origin"))
POLICY = ("default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
          "form-action 'self'; frame-ancestors 'none'")
_NONCE = "csp_nonce"


def csp_nonce() -> str:
    """This answer's nonce for its inline ``<script>`` and ``<style>`` blocks: one per
    request, made when a page first asks for it."""
    nonce = g.get(_NONCE)
    if nonce is None:
        nonce = secrets.token_urlsafe(16)
        setattr(g, _NONCE, nonce)
    return nonce


def policy(nonce: str | None) -> str:
    """The Content-Security-Policy of an HTML answer whose inline blocks carry ``nonce``."""
    if nonce is None:
        return POLICY
    source = f"'self' 'nonce-{nonce}'"
    return f"{POLICY}; script-src {source}; style-src {source}"


def register_headers(app: Flask) -> None:
    app.jinja_env.globals["csp_nonce"] = csp_nonce

    @app.after_request
    def add_headers(response: Response) -> Response:
        headers = response.headers
        for name, value in COMMON:
            headers[name] = value
        if response.mimetype == "text/html":
            headers["Content-Security-Policy"] = policy(g.get(_NONCE))
        return response
