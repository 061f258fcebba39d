"""A class's problem set: one worksheet per seed and lesson, then the answer keys, as Markdown or print-ready HTML.

The worksheets carry what the app shows before the reveal (numbers, options,
the heads' weights as tables); the keys carry each part's answer and the
worked explanation, both from the same `Exercise` the app grades with. Any of
the lessons (`attnviz.lessons.LESSONS`: basics, modern, circuits, speech) can be in it;
a step whose checkpoint is not installed is left out, and the sheet says so.
Given each student's link (`links`), the set opens with the list of every link
and each worksheet carries its own link and its QR code (an inline SVG image:
the printed sheet is scanned with a phone's camera to open the student's lesson).
No PDF: no PDF library is a dependency; print the HTML (it sets page breaks).
"""

from __future__ import annotations

import base64
import html as _html
import re
from collections.abc import Mapping

import numpy as np

from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import prepare
from attnviz.lessons import checkpoints
from attnviz.lessons.core import CELLS, CHOICE, NUMBERS, Exercise, Part, check_seed
from attnviz.lessons.registry import LESSONS, Lesson, deep_link, lesson
from attnviz.plots import qr

MAX_SEEDS = 60  # one class at a time
LETTERS = "abcdefgh"


def _check_seeds(seeds) -> list[int]:
    seeds = [check_seed(s) for s in seeds]
    if not 0 < len(seeds) <= MAX_SEEDS:
        raise SpecError("seeds", len(seeds), f"1 … {MAX_SEEDS} seeds")
    return seeds


def _table(values: np.ndarray, rows, cols, digits: int = 1) -> str:
    head = "| | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols) + "\n"
    return head + "".join(
        f"| **{r}** | " + " | ".join(f"{v:.{digits}f}" for v in row) + " |\n"
        for r, row in zip(rows, np.asarray(values), strict=True)
    )


def _blank_grid(rows, cols) -> str:
    head = "| | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols) + "\n"
    return head + "".join(f"| **{r}** |" + " ☐ |" * len(cols) + "\n" for r in rows)


def _check_lessons(lessons) -> list[Lesson]:
    if isinstance(lessons, str) or not lessons:
        raise SpecError("lessons", lessons, "a non-empty list of lesson ids: " + ", ".join(LESSONS))
    chosen = [lesson(one) for one in lessons]
    if len({one.id for one in chosen}) != len(chosen):
        raise SpecError("lessons", lessons, "each lesson once")
    return chosen


def _cells_heading(part: Part) -> str:
    if part.row_label == Part.row_label:  # the masks step's rows: the keys each query cannot see
        return "Tick the blocked cells:"
    return f"Tick the cells: {part.row_label.format(row='each row')}…"


def _question(ex: Exercise, number: int) -> str:
    out = [f"### {number}. {ex.title}\n", ex.intro + "\n", ex.given + "\n"]
    for caption, values, rows, cols in ex.tables:
        out.append(f"*{caption}*\n\n" + _table(values, rows, cols))
    for i, part in enumerate(ex.parts):
        label = f"({LETTERS[i]}) " if len(ex.parts) > 1 else ""
        out.append(f"{label}{part.prompt}\n")
        if part.kind == CHOICE:
            out.append("".join(f"- ☐ {o}\n" for o in part.options))
        elif part.kind == CELLS:
            out.append(_cells_heading(part) + "\n\n" + _blank_grid(part.rows, part.options))
        elif part.kind == NUMBERS:
            out.append("  ".join(f"{o} = ______" for o in part.options) + "\n")
        else:
            out.append("Shape: ( ______________ )\n")
    return "\n".join(out)


def _key(ex: Exercise, number: int) -> str:
    answers = "".join(
        f"- {'(' + LETTERS[i] + ') ' if len(ex.parts) > 1 else ''}**{p.answer_text}**\n"
        for i, p in enumerate(ex.parts)
    )
    return f"**{number}. {ex.title}**\n\n{answers}\n{ex.explanation}\n"


def _titles(one: Lesson, seed: int) -> tuple[str, str]:
    """A worksheet's heading and its key's (the basics lesson's as they always were)."""
    if one.id == "basics":
        return f"# attnviz lesson — worksheet, seed {seed}", f"# Answer key — seed {seed}"
    return (
        f"# attnviz lesson “{one.title}” — worksheet, seed {seed}",
        f"# Answer key “{one.title}” — seed {seed}",
    )


def qr_image(link: str) -> str:
    """`link`'s QR code as a Markdown image (an SVG data URI, which the HTML export inlines as <img>)."""
    data = base64.b64encode(qr.svg(link, scale=3).encode()).decode()
    return f"![QR code of the link](data:image/svg+xml;base64,{data})"


def _check_links(links, seeds: list[int], chosen: list[Lesson]) -> dict[tuple[str, int], str]:
    """`{(lesson id, seed): address}` with an address for every sheet, or a `SpecError`."""
    if links is None:
        return {}
    wanted = [(one.id, s) for s in seeds for one in chosen]
    allowed = "one http(s) address per (lesson id, seed) of the sheets, e.g. {('basics', 3): 'http://…'}"
    if not isinstance(links, Mapping):
        raise SpecError("links", links, allowed)
    for key in wanted:
        link = links.get(key)
        if not isinstance(link, str) or not re.fullmatch(r"https?://\S{1,1990}", link):
            raise SpecError("links", f"{key}: {link!r}"[:80], allowed)
    return {key: links[key] for key in wanted}


def _link_list(seeds: list[int], chosen: list[Lesson], links: dict[tuple[str, int], str]) -> str:
    """The first sheet: every student's link, one row per seed (copy them, or print the sheets)."""
    head = "| Seed | " + " | ".join(one.title for one in chosen) + " |\n|---|" + "---|" * len(chosen) + "\n"
    rows = "".join(
        f"| {s} | " + " | ".join(f"`{links[one.id, s]}`" for one in chosen) + " |\n" for s in seeds
    )
    return (
        f"# Student links — {len(seeds)} students\n\nOne link per student: it opens the lesson with that "
        "student's numbers (their seed). Each worksheet carries its link and QR code.\n\n" + head + rows
    )


def _sheet(
    one: Lesson, seed: int, exercises: list[Exercise], link: str | None = None, in_class: bool = False
) -> list[str]:
    query = "?" + deep_link(one.id, 0, seed).split("?", 1)[1] if one.id != "basics" else f"?seed={seed}"
    where = (
        f"Your link: `{link}`\n\n{qr_image(link)}\n"
        if link
        else f"Check your answers in the app: your class's link with `seed={seed}`.\n"
        if in_class
        else f"Check your answers in the app: the Lesson page with `{query}`.\n"
    )
    head = f"{_titles(one, seed)[0]}\n\nName: ____________________\n\n{where}"
    notes = "".join(f"\n*{note}*\n" for note in one.notes)
    return [head + notes, *(_question(ex, i + 1) for i, ex in enumerate(exercises))]


def markdown(
    seeds,
    lessons=("basics",),
    links: Mapping[tuple[str, int], str] | None = None,
    *,
    instances: Mapping[int, int] | None = None,
    monitor: Monitor | None = None,
) -> str:
    """The worksheets of `seeds` (one per student and lesson), then their answer keys, as Markdown.

    Args:
        seeds: one seed per student, at most `MAX_SEEDS`.
        lessons: the lessons' ids, in the order the sheets take.
        links: each sheet's student link, `{(lesson id, seed): "http://…/lesson?…"}`: the set then
            opens with the list of every link, and each worksheet shows its link and QR code.
        monitor: told `(sheets built, sheets)` after each student's lesson is built (the modern
            and circuits lessons run SmolLM2); a stop ends it there (`Stop`).
        instances: a class's `{seed: instance seed}` (`attnviz.classroom.instance_seed`): each sheet
            and key is headed by its seed and drawn from its instance (a seed not named: itself).

    Raises:
        SpecError: no seeds, more than `MAX_SEEDS`, a seed out of range, an unknown lesson, or
            `links` without an http(s) address for some sheet.
    """
    seeds, chosen = _check_seeds(seeds), _check_lessons(lessons)
    links = _check_links(links, seeds, chosen)
    monitor = watch(monitor)
    sheets = {}
    for one in chosen:
        for s in seeds:
            drawn = check_seed(instances.get(s, s)) if instances else s
            sheets[one.id, s] = [one.exercise(i, drawn) for i in range(len(one.steps))]
            monitor.step(len(sheets), len(chosen) * len(seeds))
    out = [_link_list(seeds, chosen, links)] if links else []
    for s in seeds:
        for one in chosen:
            out += _sheet(one, s, sheets[one.id, s], links.get((one.id, s)), in_class=bool(instances))
    for s in seeds:
        for one in chosen:
            out.append(_titles(one, s)[1] + "\n")
            out += [_key(ex, i + 1) for i, ex in enumerate(sheets[one.id, s])]
    return "\n".join(out)


# -- HTML: the same Markdown, converted by the few rules it uses -----------------------------------

_INLINE = (
    (
        re.compile(r"!\[([^\]]*)\]\((data:image/svg\+xml;base64,[A-Za-z0-9+/=]+)\)"),
        r'<img class="qr" alt="\1" src="\2">',
    ),
    (re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"(?<![\w*])\*(?!\s)(.+?)\*(?!\w)"), r"<em>\1</em>"),
    (re.compile(r"`(.+?)`"), r"<code>\1</code>"),
)
_CSS = """
body { font: 11pt/1.45 Georgia, serif; max-width: 48rem; margin: 2rem auto; padding: 0 1rem; color: #111; }
h1 { font-size: 1.5rem; border-bottom: 2px solid #333; } h3 { margin-top: 1.4rem; }
table { border-collapse: collapse; margin: .4rem 0; } td, th { border: 1px solid #999; padding: .15rem .5rem; }
td { text-align: right; } ul { list-style: none; padding-left: .5rem; }
td code { font-size: 9pt; word-break: break-all; } img.qr { width: 3.2cm; height: 3.2cm; }
.sheet { page-break-after: always; break-after: page; }
@media print { body { margin: 0; max-width: none; } .sheet { page-break-after: always; } }
"""


def _inline(text: str) -> str:
    text = _html.escape(text, quote=False)
    for pattern, repl in _INLINE:
        text = pattern.sub(repl, text)
    return text


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _block(lines: list[str]) -> str:
    if lines[0].startswith("|"):
        head, body = _cells(lines[0]), [_cells(row) for row in lines[2:]]
        rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body)
        return "<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + f"</tr>{rows}</table>"
    if lines[0].startswith("# "):
        return f"<h1>{_inline(lines[0][2:])}</h1>"
    if lines[0].startswith("### "):
        return f"<h3>{_inline(lines[0][4:])}</h3>"
    if lines[0].startswith("- "):
        return "<ul>" + "".join(f"<li>{_inline(item[2:])}</li>" for item in lines) + "</ul>"
    return "<p>" + "<br>".join(_inline(line.rstrip()) for line in lines) + "</p>"


def _to_html(md: str) -> str:
    blocks, current = [], []
    for line in md.splitlines():
        if not line.strip():
            if current:
                blocks.append(_block(current))
            current = []
        elif current and current[0].startswith("|") != line.startswith("|"):
            blocks.append(_block(current))
            current = [line]
        else:
            current.append(line)
    if current:
        blocks.append(_block(current))
    return "\n".join(blocks)


def both(seeds, lesson_ids, links=None, instances=None, *, monitor: Monitor | None = None) -> tuple[str, str]:
    """A class's problem set as `(Markdown, print-ready HTML)`, as a worker builds it for the Teacher
    page. `links`: each sheet's address, `instances` a class's instance seeds, each as a mapping or as
    pairs (a page's cache key). The lessons' checkpoints load inside `monitor.loading()`, as
    `registry.packed_exercise`'s do."""
    monitor = watch(monitor)
    with monitor.loading():
        prepare(checkpoints.framework())
        drawn = dict(instances) if instances else None
        md = markdown(seeds, lesson_ids, dict(links) if links else None, instances=drawn, monitor=monitor)
    return md, to_html(md)


def html(seeds, lessons=("basics",), links: Mapping[tuple[str, int], str] | None = None) -> str:
    """The problem set of `markdown(seeds, lessons, links)` as one print-ready HTML page (a page break
    per sheet and key; each QR code an inline SVG image)."""
    return to_html(markdown(seeds, lessons, links))


def to_html(md: str) -> str:
    """A problem set's Markdown (`markdown`) as one print-ready HTML page: each `# ` heading starts a
    sheet on a new page."""
    parts = re.split(r"(?m)^(?=# )", md)
    sheets = "".join(f'<section class="sheet">\n{_to_html(p)}\n</section>\n' for p in parts if p.strip())
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>attnviz lesson — problem set</title><style>{_CSS}</style></head>\n<body>\n{sheets}</body></html>\n"
    )
