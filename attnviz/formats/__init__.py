"""How attnviz writes three facts for a reader, each one way everywhere (issue 41, point 4): a size
in bytes, a token, a head's name.

    size(46_080)          "45 KiB"      binary units (B, KiB, MiB, GiB), three significant digits
    token(" the\\n")       "␣the⏎"       spaces, line breaks and tabs drawn: ␣, ⏎, ⇥
    tokens([" a", "\\n"])   [" a", "⏎"]   a sequence: only a token of whitespace alone drawn
    head(3, 5)            "L3.H5"       layer 3, head 5 (both from 0); `parse_head` reads it back

`tests/test_house.py` greps the library for a second way to write them (an f-string `L{…}.H{…}`, a
byte count divided by 2**20 and written "MiB", the other newline glyph ↵).
"""

from __future__ import annotations

import re

UNITS = ("B", "KiB", "MiB", "GiB")
DRAWN = {" ": "␣", "\n": "⏎", "\t": "⇥"}  # what `token` draws for each invisible character
_DRAWN = str.maketrans(DRAWN)
_HEAD = re.compile(r"L(\d+)\.H(\d+)")


def size(n: float) -> str:
    """Bytes in binary units, three significant digits: '512 B', '45 KiB', '180 MiB', '1.41 GiB'.

    A value that would round to 1,024 of a unit is written in the next one ('1 MiB', not '1,024 KiB');
    past 999.5 GiB the digits are grouped ('2,048 GiB')."""
    for unit in UNITS:
        if abs(n) < 1023.5 or unit == UNITS[-1]:
            return f"{n:.3g} {unit}" if abs(n) < 999.5 else f"{n:,.0f} {unit}"  # 1,020 KiB, not 1.02e+03
        n /= 1024
    raise AssertionError  # unreachable: the loop returns at the last unit


def token(text: str) -> str:
    """A token with its spaces, line breaks and tabs drawn: " Mary" → "␣Mary", "\\n" → "⏎", "\\t" → "⇥"."""
    return str(text).translate(_DRAWN)


def tokens(texts: list[str]) -> list[str]:
    """A sequence's tokens as an axis or a table shows them: a token that is only spaces, line breaks or
    tabs drawn (`token`), a word as it is (its leading space shows as a gap in a label)."""
    return [t if t.strip() else token(t) for t in texts]


def head(layer: int, index: int) -> str:
    """A head's name: layer `layer`, head `index` (both counted from 0) → "L3.H5"."""
    return f"L{int(layer)}.H{int(index)}"


def parse_head(name: str) -> tuple[int, int]:
    """`head`'s name read back: "L3.H5" → (3, 5).

    Raises:
        ValueError: `name` is not written as `head` writes one (it names what was received).
    """
    found = _HEAD.fullmatch(str(name).strip())
    if found is None:
        raise ValueError(f"a head's name like 'L3.H5' (layer 3, head 5); received {str(name)[:40]!r}")
    return int(found[1]), int(found[2])
