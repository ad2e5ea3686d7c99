"""The live map page itself (``/map``): ``static/map.html``, one file with its script and style inline, read once.

Its Content-Security-Policy allows exactly that script and style (by their
SHA-256), requests to this server, and nothing else. The data the page draws
come from ``/map.json`` (``ops.map_view.MapView``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

__all__ = ["MapPage", "page_policy"]

@dataclass(frozen=True)
class MapPage:
    """The page's HTML and the Content-Security-Policy that lets exactly its own script and style run."""

    html: bytes
    policy: str

    @classmethod
    def load(cls) -> MapPage:
        """Read ``static/map.html`` (package data) once."""
        html = resources.files("streamembed.ops").joinpath("static", "map.html").read_bytes()
        return cls(html, page_policy(html))


def page_policy(html: bytes) -> str:
    """CSP allowing the page's inline ``<script>`` and ``<style>`` by their SHA-256, and fetches to this origin."""
    text = html.decode("utf-8")
    scripts = re.findall(r"<script>(.*?)</script>", text, flags=re.S)
    styles = re.findall(r"<style>(.*?)</style>", text, flags=re.S)
    if len(scripts) != 1 or len(styles) != 1:
        raise ValueError("map.html must hold exactly one <script> and one <style> block, without attributes")

    def sha(block: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(block.encode("utf-8")).digest()).decode() + "'"

    return (f"default-src 'none'; script-src {sha(scripts[0])}; style-src {sha(styles[0])}; connect-src 'self'; "
            f"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
