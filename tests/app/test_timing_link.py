"""The Timing page says which values of its link it ignored, in the explorer's words (issue 20 §3)."""

from tests.app.conftest import assert_clean, open_page, warnings


def test_bad_link_values_are_named_with_what_is_allowed():
    at = open_page(
        "timing",
        {"timing.heads": "3", "timing.repeats": "999", "timing.mask": "diagonal", "timing.lengths": "100"},
    )
    assert_clean(at)
    shown = warnings(at)
    assert "URL parameter timing.heads='3' ignored; allowed: 1 | 2 | 4 | 8 | 16." in shown
    assert "URL parameter timing.repeats='999' ignored; allowed: 3 … 50 (whole numbers)." in shown
    assert "URL parameter timing.mask='diagonal' ignored; allowed: none | causal." in shown
    assert "timing.lengths='100' ignored" in shown
    assert at.selectbox(key="timing.heads").value == 8  # the default, as the note says


def test_a_good_link_gets_no_note():
    at = open_page("timing", {"timing.heads": "4", "timing.repeats": "9", "timing.mask": "causal"})
    assert_clean(at)
    assert "ignored" not in warnings(at)
    assert at.selectbox(key="timing.heads").value == 4 and at.number_input(key="timing.repeats").value == 9
