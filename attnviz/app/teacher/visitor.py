"""Who is asking, as the class database limits it: one key per browser (issue 46, points 2 and 22).

The key is a SHA-256 of the token in the browser's `_streamlit_xsrf` cookie, which every tab and
reload of a browser sends back. Not of the cookie's text: Tornado writes the token masked
(`2|mask|masked token|timestamp`) with a fresh random mask on every page load, so the text changes
with each reload while the token under it stays (the final walk of 28 Nov 2026 joined one browser
under two nicknames by reloading). Where no cookie came (XSRF protection off, an AppTest run) it is a
random key kept in this session. The database stores only its hash again
(`attnviz.classroom.admission`): one browser joins a class under one nickname and creates at most a
few classes an hour. A visitor who clears their cookies is a new browser: the per-class joining
allowance and the per-server creation limit still hold for them.
"""

from __future__ import annotations

import hashlib
import secrets

import streamlit as st

COOKIE = "_streamlit_xsrf"
SESSION_KEY = "teacher.visitor"


def browser_token(cookie: str) -> str:
    """The token under an XSRF cookie's text: a version-2 cookie (`2|mask|masked|timestamp`, hex)
    unmasked — the same for every load of one browser —, any other text as it is."""
    parts = cookie.split("|")
    if len(parts) == 4 and parts[0] == "2":
        try:
            mask, masked = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
        except ValueError:
            return cookie
        if len(mask) == 4:
            return bytes(b ^ mask[i % 4] for i, b in enumerate(masked)).hex()
    return cookie


def key() -> str:
    """This browser's key (64 hex characters), or this session's where the browser sent no cookie."""
    try:
        cookie = st.context.cookies.get(COOKIE)
    except (AttributeError, RuntimeError):  # no browser context: a bare script run
        cookie = None
    if isinstance(cookie, str) and cookie:  # AppTest's context hands back a mock, not text
        return hashlib.sha256(f"browser:{browser_token(cookie)}".encode()).hexdigest()
    return st.session_state.setdefault(SESSION_KEY, secrets.token_hex(32))
