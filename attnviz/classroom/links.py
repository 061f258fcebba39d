"""Handing a class out: the students' link, the teacher's link, and a link's QR code as SVG.

The QR code is drawn by segno (pure Python), error correction level M (15 % of the code may be
unreadable: a projector's glare, a crease in a printout).
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from attnviz.classroom.rules import ID, ClassError, check_code, check_seed, check_token
from attnviz.plots import qr
from attnviz.plots.qr import MAX_LINK


def _base(base_url: str) -> str:
    """The app's address without a trailing slash, or a `ClassError`."""
    allowed = "the app's address, http(s)://host[:port][/path], without a query or fragment"
    if not isinstance(base_url, str):
        raise ClassError("base_url", base_url, allowed)
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ClassError("base_url", base_url, allowed)
    return base_url.strip().rstrip("/")


def public_base(typed: str | None, setting: str | None, browser: str | None) -> str | None:
    """The address students' links start with: the teacher's `typed` one, else the operator's
    `setting` (`ATTNVIZ_PUBLIC_URL`), else the one the `browser` used (None: relative links).

    Raises:
        ClassError: (field "base_url") a typed or set address that is not http(s)://host[:port][/path].
    """
    for given in (typed, setting):
        if given and given.strip():
            return _base(given)
    return browser


def _page(page: str) -> str:
    if not isinstance(page, str) or not ID.fullmatch(page):
        raise ClassError("page", page, f"a page's URL path ({ID.pattern})")
    return page


def student_link(
    base_url: str, code: str, lesson: str, *, seed: int | None = None, page: str = "lesson"
) -> str:
    """The address a student opens: the lesson page with the class code (and their seed).

    >>> student_link("http://host:8501", "abc234", "basics", seed=7)
    'http://host:8501/lesson?class=ABC234&lesson=basics&seed=7'
    """
    if not isinstance(lesson, str) or not ID.fullmatch(lesson):
        raise ClassError("lesson", lesson, f"a lesson id ({ID.pattern})")
    query = {"class": check_code(code), "lesson": lesson}
    if seed is not None:
        query["seed"] = str(check_seed(seed))
    return f"{_base(base_url)}/{_page(page)}?{urlencode(query)}"


def teacher_link(base_url: str, teacher_token: str, *, page: str = "teacher") -> str:
    """The teacher's private address (whoever has it reads the class's answers)."""
    return f"{_base(base_url)}/{_page(page)}?{urlencode({'token': check_token(teacher_token)})}"


def qr_svg(link: str, *, scale: int = 4) -> str:
    """`link` as a QR code: an SVG document (no XML declaration, so it can be inlined in HTML),
    `scale` pixels per module, the standard 4-module quiet zone."""
    if not isinstance(link, str) or not 0 < len(link) <= MAX_LINK:
        raise ClassError("link", link, f"a link of 1 … {MAX_LINK:,} characters")
    if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale <= 32:
        raise ClassError("scale", scale, "an integer in 1 … 32")
    return qr.svg(link, scale=scale)
