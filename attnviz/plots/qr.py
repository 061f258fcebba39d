"""QR codes as SVG: the class links a teacher projects and the links printed on a problem set."""

from __future__ import annotations

import io

import segno

from attnviz.errors import SpecError

MAX_LINK = 2_000  # characters; a QR code of level M holds 2,331 bytes at most


def svg(link: str, *, scale: int = 4) -> str:
    """`link` (1 … `MAX_LINK` characters, else a `SpecError`) as a QR code: an SVG document with no
    XML declaration (it can be inlined in HTML), `scale` pixels per module, the standard 4-module
    quiet zone, error correction level M."""
    if not isinstance(link, str) or not 0 < len(link) <= MAX_LINK:
        raise SpecError("link", link, f"a link of 1 … {MAX_LINK:,} characters")
    out = io.BytesIO()
    segno.make(link, error="m", micro=False).save(
        out, kind="svg", scale=scale, border=4, xmldecl=False, nl=False
    )
    return out.getvalue().decode()
