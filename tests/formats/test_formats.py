"""`attnviz.formats` against cases worked by hand (1 KiB = 1,024 B, 1 MiB = 1,024 KiB)."""

from __future__ import annotations

import pytest

from attnviz import formats


@pytest.mark.parametrize(
    ("n", "written"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1000, "1,000 B"),  # past 999.5 the digits are grouped, not '1e+03 B'
        (1023, "1,023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (45 * 1024, "45 KiB"),  # the Tiles page's 4k-token tiles
        (47_206, "46.1 KiB"),  # 46.100… KiB
        (1_044_480, "1,020 KiB"),  # 1,020 KiB: not '1.02e+03 KiB'
        (1_048_064, "1 MiB"),  # 1,023.5 KiB would be written '1,024 KiB': the next unit instead
        (180 * 2**20, "180 MiB"),
        (256 * 2**20, "256 MiB"),  # the app's budget per run
        (int(1.40625 * 2**30), "1.41 GiB"),  # 1,440 MiB
        (4.22 * 2**30, "4.22 GiB"),
        (2048 * 2**30, "2,048 GiB"),  # the last unit grows, grouped
    ],
)
def test_size(n, written):
    assert formats.size(n) == written


@pytest.mark.parametrize(
    ("text", "written"),
    [
        (" Mary", "␣Mary"),
        ("\n", "⏎"),
        ("\n\n", "⏎⏎"),
        ("\t", "⇥"),
        (" \tx\n", "␣⇥x⏎"),
        ("word", "word"),
        ("", ""),
    ],
)
def test_token(text, written):
    assert formats.token(text) == written


def test_tokens_draw_a_token_of_whitespace_alone():
    assert formats.tokens([" Mary", " ", "\n", "\t", "x\n"]) == [" Mary", "␣", "⏎", "⇥", "x\n"]


@pytest.mark.parametrize(
    ("layer", "index", "written"), [(0, 0, "L0.H0"), (3, 5, "L3.H5"), (17, 11, "L17.H11")]
)
def test_head_and_back(layer, index, written):
    assert formats.head(layer, index) == written
    assert formats.parse_head(written) == (layer, index)


def test_a_heads_name_from_numpy_integers_reads_as_plain_numbers():
    import numpy as np

    assert formats.head(np.int64(2), np.int32(7)) == "L2.H7"


@pytest.mark.parametrize("name", ["L3H5", "3.5", "L3.H", "L-1.H2", "L3.H5.x", "", "l3.h5"])
def test_parse_head_refuses_other_names_naming_them(name):
    with pytest.raises(ValueError, match=r"'L3\.H5'") as caught:
        formats.parse_head(name)
    assert repr(name) in str(caught.value)
