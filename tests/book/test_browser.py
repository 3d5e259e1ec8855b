"""The built book in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

``make book-check`` runs this after ``make book``. For the index and two lesson pages it checks that every
image loaded, every link of the site resolves (pages and their anchors), the math was typeset (MathJax's
containers present, no raw ``$...$`` left in the text), nothing was requested from outside the local
server, and the console stayed free of errors; and it saves a screenshot of each page into
``book/screenshots/`` and checks that it is not blank. Skipped, with the reason, when Chromium, Playwright
or the built book is missing.
"""
from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
SHOTS = BOOK / "screenshots"
PAGES = ["index.html", "lessons/03_invariance_table.html", "lessons/17_precision_in_practice.html"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Chromium as root in a container, and with nothing to fetch from outside (the machine has no network).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
RAW_MATH = re.compile(r"\$[^$\s][^$]*\$|\\\(|\\\[")      # $...$, \( or \[ left as text

if CHROMIUM is None:
    pytest.skip("Chromium is not installed: `sudo apt-get install chromium` (Debian), then `make book-check`",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: it is in the book "
                                                              "extra (`make book` installs it)")
if not (BOOK / "index.html").exists():
    pytest.skip("the book is not built: run `make book` first", allow_module_level=True)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    """The built book served on 127.0.0.1 (an ephemeral port), as a browser would read it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(BOOK)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


def visit(browser, url):
    """Open ``url``; return the page and what went wrong while it loaded."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    trouble = []
    page.on("console", lambda m: trouble.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: trouble.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: trouble.append(f"request failed: {r.url}"))
    page.on("request", lambda r: trouble.append(f"outside request: {r.url}")
            if urlparse(r.url).hostname not in ("127.0.0.1", None) and not r.url.startswith("data:") else None)
    page.on("response", lambda r: trouble.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(url, wait_until="networkidle")
    page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)")
    page.evaluate("() => window.MathJax ? MathJax.startup.promise : null")
    return page, trouble


def not_blank(png: Path) -> float:
    """The share of pixels that differ from the most common colour (a blank page: about 0)."""
    import matplotlib.image
    img = matplotlib.image.imread(str(png))[..., :3]
    flat = (img.reshape(-1, 3) * 255).astype(np.uint8)
    _, counts = np.unique(flat, axis=0, return_counts=True)
    return 1.0 - counts.max() / flat.shape[0]


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_clean_with_math_images_and_links(path, site, browser):
    page, trouble = visit(browser, site + path)
    images = page.eval_on_selector_all("img", "els => els.map(e => [e.currentSrc || e.src, e.complete, "
                                              "e.naturalWidth])")
    assert images, f"{path}: no image"
    broken = [src for src, complete, width in images if not complete or width == 0]
    assert not broken, f"{path}: images that did not load: {broken}"

    text = page.evaluate("""() => { const c = document.querySelector('article') || document.body;
        const k = c.cloneNode(true);
        k.querySelectorAll('pre, code, script, style, mjx-container, .highlight').forEach(e => e.remove());
        return k.innerText; }""")
    raw = RAW_MATH.findall(text)
    assert not raw, f"{path}: math left untypeset: {raw[:5]}"
    if path.startswith("lessons/"):
        assert page.locator("mjx-container").count() > 0, f"{path}: no typeset math"
        answers = page.locator("details.answer")
        assert answers.count() >= 2, f"{path}: fewer than two folded answers"
        for i in range(answers.count()):         # closed until the reader opens it: the text is not shown
            assert not answers.nth(i).evaluate("e => e.open"), f"{path}: answer {i + 1} is open"
            assert not answers.nth(i).locator("p").is_visible(), f"{path}: answer {i + 1} can be read unopened"

    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    checked = set()
    for href in hrefs:
        base, anchor = urldefrag(href)
        if not base.startswith(site) or (base, anchor) in checked:
            continue
        checked.add((base, anchor))
        response = page.request.get(base)
        assert response.ok, f"{path}: link {href} answers {response.status}"
        if anchor and base.endswith(".html"):
            body = response.text()
            assert f'id="{anchor}"' in body, f"{path}: link {href}: no element with id {anchor!r}"
    assert checked, f"{path}: no link inside the site"

    SHOTS.mkdir(exist_ok=True)
    shot = SHOTS / (Path(path).stem + ".png")
    page.screenshot(path=str(shot))
    assert not_blank(shot) > 0.02, f"{path}: the screenshot {shot} is (nearly) blank"
    assert not trouble, f"{path}: " + "; ".join(trouble[:10])
    page.close()


def test_every_lesson_has_a_page_and_a_notebook():
    lessons = sorted(p.stem for p in (ROOT / "lessons").glob("[0-9][0-9]_*.py"))
    for stem in lessons:
        assert (BOOK / "lessons" / f"{stem}.html").exists(), f"no page for {stem}"
        assert list(BOOK.rglob(f"{stem}.ipynb")), f"no notebook of {stem} in book/"
        assert list(BOOK.rglob(f"_downloads/*/{stem}.py")), f"no script of {stem} to download"


def test_no_page_loads_from_the_network():
    """No page of the site names a script, style, font or image on another host."""
    outside = re.compile(r"""(?:src|href)=["'](?:https?:)?//[^"']+\.(?:js|css|woff2?|ttf|png|svg|jpg)""")
    for page in BOOK.rglob("*.html"):
        found = outside.findall(page.read_text(encoding="utf-8"))
        assert not found, f"{page.relative_to(BOOK)} loads {found[:3]}"
