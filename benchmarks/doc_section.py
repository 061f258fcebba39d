"""One benchmark's section of a docs/ page, replaced in place: the rest of the page is kept.

Every benchmark that writes into docs/ writes only between its own two markers (HTML comments,
invisible on the rendered page); a page holds the sections of several benchmarks and prose around
them. A page without the markers gets the section added at its end. Used by every script in
benchmarks/ that writes a page (each puts the repository root on `sys.path` first).
"""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of the section called `name`."""
    return f"<!-- {name} -->", f"<!-- /{name} -->"


def write_section(path: Path | str, text: str, begin: str, end: str) -> None:
    """Replace what lies between `begin` and `end` in `path` by `text` (the markers kept), or add
    the marked section at the end of the page (made if missing)."""
    path = Path(path)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{begin}\n{text.strip(chr(10))}\n{end}"
    if begin in old and end in old.split(begin, 1)[1]:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        new = (old.rstrip("\n") + "\n\n" if old.strip() else "") + block + "\n"
    path.write_text(new, encoding="utf-8")
