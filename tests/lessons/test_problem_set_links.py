"""The problem set with every student's link (issue 33: the export had worksheets and keys, no links):
the set opens with the list of all links, each worksheet carries its own link and a QR code that an
independent reader (zxing-cpp) decodes back to that link, in the Markdown and in the HTML."""

from __future__ import annotations

import base64
import re

import pytest

from attnviz.errors import SpecError
from attnviz.lessons import problem_set
from tests.classroom.test_links import decode

BASE = "http://school.example:8501"


def links(seeds, lessons=("basics",)) -> dict:
    return {(one, s): f"{BASE}/lesson?class=ABC234&lesson={one}&seed={s}" for s in seeds for one in lessons}


def qr_links(text: str) -> list[str]:
    """Every QR image of the Markdown or HTML, decoded."""
    found = re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", text)
    return [decode(base64.b64decode(b).decode()) for b in found]


def test_thirty_students_every_link_listed_and_on_its_sheet_with_a_qr_code():
    seeds = list(range(100, 130))
    given = links(seeds)
    md = problem_set.markdown(seeds, links=given)
    first, *sheets = re.split(r"(?m)^(?=# attnviz lesson)", md.split("\n# Answer key")[0])
    assert first.startswith("# Student links — 30 students")
    assert [f"| {s} | `{given['basics', s]}` |" in first for s in seeds] == [True] * 30  # all, no "…"
    assert len(sheets) == 30
    for s, sheet in zip(seeds, sheets, strict=True):
        assert f"seed {s}" in sheet.splitlines()[0]
        assert f"Your link: `{given['basics', s]}`" in sheet
        assert qr_links(sheet) == [given["basics", s]]


def test_html_inlines_each_qr_code_and_lists_every_link():
    seeds = [3, 4]
    given = links(seeds, ("basics", "modern"))
    page = problem_set.html(seeds, ("basics",), {k: v for k, v in given.items() if k[0] == "basics"})
    assert page.count('<img class="qr"') == 2
    assert qr_links(page) == [given["basics", 3], given["basics", 4]]
    escaped = given["basics", 3].replace("&", "&amp;")
    assert page.count(f"<code>{escaped}</code>") == 2  # in the list and on the sheet
    assert page.count('<section class="sheet">') == 1 + 2 + 2  # links, two sheets, two keys


def test_without_links_the_set_is_as_before():
    md = problem_set.markdown([5])
    assert "Student links" not in md and "data:image" not in md
    assert "Check your answers in the app: the Lesson page with `?seed=5`." in md


@pytest.mark.parametrize(
    "bad",
    [
        {("basics", 3): "http://host/lesson?seed=3"},  # seed 4's link missing
        {("basics", 3): "javascript:alert(1)", ("basics", 4): "http://host/x"},
        "http://host/lesson",
    ],
)
def test_links_without_an_address_for_every_sheet_are_refused_naming_the_field(bad):
    with pytest.raises(SpecError) as e:
        problem_set.markdown([3, 4], links=bad)
    assert e.value.field == "links"
