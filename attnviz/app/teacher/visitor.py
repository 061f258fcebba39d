"""Who is asking, as the class database limits it: one key per browser (issue 46, points 2 and 22).

The key is a SHA-256 of the browser's `_streamlit_xsrf` cookie, which Streamlit sets once per
browser and every tab and reload of it sends back; where no cookie came (XSRF protection off, an
AppTest run) it is a random key kept in this session. The database stores only its hash again
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


def key() -> str:
    """This browser's key (64 hex characters), or this session's where the browser sent no cookie."""
    try:
        cookie = st.context.cookies.get(COOKIE)
    except (AttributeError, RuntimeError):  # no browser context: a bare script run
        cookie = None
    if isinstance(cookie, str) and cookie:  # AppTest's context hands back a mock, not text
        return hashlib.sha256(f"browser:{cookie}".encode()).hexdigest()
    return st.session_state.setdefault(SESSION_KEY, secrets.token_hex(32))
