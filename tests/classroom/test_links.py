"""Class links and their QR codes: the link carries the class, the lesson and the seed; the SVG,
read back into modules and decoded by zxing-cpp (an independent reader), gives the link."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
import zxingcpp

from attnviz.classroom import ClassError, qr_svg, student_link, teacher_link
from attnviz.lessons.core import MAX_SEED

SVG = "{http://www.w3.org/2000/svg}"


def modules(svg: str) -> np.ndarray:
    """The dark modules of segno's SVG (one path of horizontal runs `M x y h n m dx dy …` at
    row y + 0.5) as a bool `(size, size)` array, quiet zone included."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    [path] = root.iter(f"{SVG}path")
    transform = path.get("transform", "scale(1)")  # segno writes none at scale 1
    scale = float(re.fullmatch(r"scale\((\d+)\)", transform).group(1))
    size = int(float(root.get("width")) / scale)
    dark = np.zeros((size, size), bool)
    x = y = 0.0
    for op, a, b in re.findall(r"([MmHh])\s*(-?[\d.]+)(?:[\s,]+(-?[\d.]+))?", path.get("d")):
        if op in "Mm":
            x, y = (float(a), float(b)) if op == "M" else (x + float(a), y + float(b))
        else:
            run = float(a) if op == "h" else float(a) - x
            dark[int(y), int(x) : int(x + run)] = True
            x += run
    return dark


def decode(svg: str) -> str:
    image = np.where(modules(svg), 0, 255).astype(np.uint8).repeat(4, 0).repeat(4, 1)
    [found] = zxingcpp.read_barcodes(image)
    assert found.format == zxingcpp.BarcodeFormat.QRCode
    return found.text


def test_a_student_link_opens_the_lesson_with_the_class():
    link = student_link("https://school.example/attn/", " abc-234 ", "circuits", seed=MAX_SEED)
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "school.example", "/attn/lesson")
    assert parse_qs(parts.query) == {"class": ["ABC234"], "lesson": ["circuits"], "seed": [str(MAX_SEED)]}
    assert "seed" not in student_link("http://host:8501", "ABC234", "basics")


def test_a_teacher_link_carries_the_token():
    token = "Zm9v_-bar" * 4
    assert parse_qs(urlsplit(teacher_link("http://host:8501", token)).query) == {"token": [token]}


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: student_link("ftp://host", "ABC234", "basics"), "base_url"),
        (lambda: student_link("host:8501", "ABC234", "basics"), "base_url"),
        (lambda: student_link("http://host/?x=1", "ABC234", "basics"), "base_url"),
        (lambda: student_link("http://host", "ABC10O", "basics"), "code"),
        (lambda: student_link("http://host", "ABC234", "../admin"), "lesson"),
        (lambda: student_link("http://host", "ABC234", "basics", seed=-1), "seed"),
        (lambda: student_link("http://host", "ABC234", "basics", page="a/b"), "page"),
        (lambda: qr_svg(""), "link"),
        (lambda: qr_svg("x" * 2_001), "link"),
        (lambda: qr_svg("http://host", scale=0), "scale"),
    ],
)
def test_a_bad_link_part_is_refused_naming_it(call, field):
    with pytest.raises(ClassError) as e:
        call()
    assert e.value.field == field


@pytest.mark.parametrize("scale", [1, 4])
def test_the_qr_code_is_svg_that_reads_back_as_the_link(scale):
    link = student_link("http://192.168.1.20:8501", "XK7P2M", "modern", seed=31)
    svg = qr_svg(link, scale=scale)
    assert not svg.startswith("<?xml")  # inlinable in HTML
    assert decode(svg) == link


def test_the_longest_link_still_fits_a_qr_code():
    link = "https://" + "a" * 1_980 + ".example"
    assert decode(qr_svg(link[:2_000])) == link[:2_000]
