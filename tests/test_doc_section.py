"""benchmarks/doc_section.py: a benchmark rewrites its own section of a docs/ page and nothing else."""

from benchmarks.doc_section import markers, write_section

PAGE = "# Title\n\nProse above.\n\n<!-- a -->\nold a\n<!-- /a -->\n\nProse between.\n\n<!-- b -->\nold b\n<!-- /b -->\nProse after.\n"


def test_a_section_is_replaced_and_the_rest_of_the_page_kept(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    write_section(page, "new a\n| x |\n", *markers("a"))
    assert page.read_text() == PAGE.replace("old a", "new a\n| x |")
    write_section(page, "new b", "<!-- b -->", "<!-- /b -->")
    assert page.read_text() == PAGE.replace("old a", "new a\n| x |").replace("old b", "new b")


def test_a_page_without_the_section_gets_it_at_its_end(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    write_section(page, "c's text", *markers("c"))
    assert page.read_text() == PAGE + "\n<!-- c -->\nc's text\n<!-- /c -->\n"
    missing = tmp_path / "new.md"
    write_section(missing, "only", *markers("c"))
    assert missing.read_text() == "<!-- c -->\nonly\n<!-- /c -->\n"
