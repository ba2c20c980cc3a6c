"""report.html in a real headless Chromium: loads without console errors, filters work, screenshot taken.

Needs Debian's ``chromium`` (``apt-get install -y chromium``). The test installs it when it can (root with
apt-get) and skips, saying why, only when it truly cannot.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from suite_fixtures import fake_study, make_suite, noisy_predictions, run_inputs

from lakeshift.report import RunInput, build_report

pytestmark = pytest.mark.slow


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                ["apt-get", "install", "-y", "-qq", "chromium"],
                env=env,
                timeout=900,
                capture_output=True,
                check=False,
            )
        path = shutil.which("chromium")
        if path:
            return path
    pytest.skip("Chromium is not installed and could not be installed (apt-get install -y chromium)")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, list[dict]]:
    browser = find_chromium()
    root = tmp_path_factory.mktemp("browser")
    data = make_suite(root, per_size=4)
    runs = root / "runs"
    noisy_predictions(data, runs, "grid__grid+desc", 7, cot="grid+desc")
    inputs = [
        RunInput(
            p,
            data / p.stem / "maps.jsonl",
            {"model": "m1", "input_format": "grid", "cot_format": "grid+desc"},
        )
        for p in sorted(runs.rglob("*.jsonl"))
    ]
    # A PNG for some maps, to check the image path too.
    from PIL import Image

    first = json.loads((data / "id-test" / "maps.jsonl").read_text().splitlines()[0])
    (data / "id-test" / "images").mkdir()
    Image.new("RGB", (256, 256), (30, 90, 200)).save(data / "id-test" / "images" / f"{first['id']}.png")
    out = root / "out"
    build_report(inputs, out, progress=False, n_examples=200)
    html = (out / "report.html").read_text(encoding="utf-8")
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert blob is not None
    examples = json.loads(blob.group(1).replace("<\\/", "</"))["examples"]
    return browser, out / "report.html", examples


def run_browser(browser: str, url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={tmp}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        *extra,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _attr(dom: str, name: str) -> str | None:
    m = re.search(rf'<body[^>]*\s{name}="([^"]*)"', dom)
    return m.group(1) if m else None


def test_loads_without_errors_and_takes_a_screenshot(page: tuple, tmp_path: Path) -> None:
    browser, html, examples = page
    shot = tmp_path / "shot.png"
    res = run_browser(
        browser, html.as_uri(), tmp_path / "u1", f"--screenshot={shot}", "--window-size=1280,2400"
    )
    assert shot.is_file() and shot.read_bytes()[:4] == b"\x89PNG", res.stderr[-2000:]
    res = run_browser(browser, html.as_uri(), tmp_path / "u2", "--dump-dom")
    dom = res.stdout
    assert _attr(dom, "data-ready") == "1", res.stderr[-2000:]
    assert _attr(dom, "data-errors") == "0"
    assert re.search(r'<pre id="js-errors"></pre>', dom)
    console = [ln for ln in res.stderr.splitlines() if "CONSOLE" in ln]
    assert not console, console
    assert _attr(dom, "data-visible") == str(len(examples))
    assert len(re.findall(r'<div class="ex" data-verdict="[a-z_]+"', dom)) == min(25, len(examples))
    assert "<mark" in dom or all(e["verdict"] == "success" for e in examples[:25])


@pytest.mark.parametrize(
    "filters",
    [
        {"verdict": "success"},
        {"verdict": "fell_in_hole"},
        {"split": "ood-dist", "size": "8"},
        {"run": "m1 | grid | grid+desc", "verdict": "missing"},
        {"split": "id-test", "verdict": "no_answer"},
    ],
)
def test_filters_from_the_url_hash(page: tuple, tmp_path: Path, filters: dict) -> None:
    from urllib.parse import quote

    browser, html, examples = page
    expected = [e for e in examples if all(str(e[k]) == v for k, v in filters.items())]
    frag = "&".join(f"{k}={quote(v)}" for k, v in filters.items())
    res = run_browser(browser, f"{html.as_uri()}#{frag}", tmp_path / "u", "--dump-dom")
    dom = res.stdout
    assert _attr(dom, "data-ready") == "1" and _attr(dom, "data-errors") == "0", res.stderr[-2000:]
    assert _attr(dom, "data-visible") == str(len(expected)), filters
    shown = re.findall(r'<div class="ex" data-verdict="([a-z_]+)"', dom)
    assert len(shown) == min(25, len(expected))
    if "verdict" in filters:
        assert set(shown) <= {filters["verdict"]}


# ---- the figures at 20 runs ------------------------------------------------------------------------
_MEASURE = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.querySelectorAll(".figures img"));
  var rows = imgs.map(function (im) {
    var r = im.getBoundingClientRect();
    return [im.naturalWidth, im.naturalHeight, Math.round(r.width), Math.round(r.height), Math.round(r.left)];
  });
  document.body.setAttribute("data-figs", JSON.stringify(rows));
  document.body.setAttribute("data-vw", String(document.documentElement.clientWidth));
});
</script>"""


@pytest.fixture(scope="module")
def figures20(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The Plots section of the report of 20 fake runs with ``--reference paper``, as its own page (the
    report's CSS, its figures, a script recording each image's decoded and displayed size)."""
    browser = find_chromium()
    root = tmp_path_factory.mktemp("browser20")
    data, runs = fake_study(root, 20, per_size=6)
    out = root / "out"
    train = data / "id-train" / "maps.jsonl"
    build_report(
        run_inputs(data, runs), out, train_maps=train, progress=False, n_examples=40, reference="paper"
    )
    html = (out / "report.html").read_text(encoding="utf-8")
    style = re.search(r"<style>.*?</style>", html, re.S)
    figures = re.search(r'<h2>Plots</h2>\s*<div class="figures">.*?</div>', html, re.S)
    assert style and figures
    page = out / "figures.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8">{style.group(0)}</head><body>'
        f"{figures.group(0)}{_MEASURE}</body></html>",
        encoding="utf-8",
    )
    return browser, page


def test_figures_at_20_runs_render_readably(figures20: tuple, tmp_path: Path) -> None:
    from PIL import Image

    browser, page = figures20
    res = run_browser(browser, page.as_uri(), tmp_path / "u1", "--dump-dom", "--window-size=1400,1000")
    figs = json.loads((_attr(res.stdout, "data-figs") or "[]").replace("&quot;", '"'))
    viewport = int(_attr(res.stdout, "data-vw") or 0)
    assert len(figs) == 4, res.stderr[-2000:]
    for natural_w, natural_h, shown_w, _shown_h, left in figs:
        assert natural_w > 600 and natural_h > 300  # the PNG decoded, at a real size
        assert left >= 0 and left + shown_w <= viewport  # fits the page: no horizontal scrolling
        assert shown_w >= 0.6 * min(natural_w, viewport - 40)  # not shrunk into illegibility
    shot = tmp_path / "figures.png"
    height = sum(f[3] for f in figs) + 400
    run_browser(
        browser, page.as_uri(), tmp_path / "u2", f"--screenshot={shot}", f"--window-size=1400,{height}"
    )
    assert shot.is_file() and shot.read_bytes()[:4] == b"\x89PNG"
    if os.environ.get("LAKESHIFT_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["LAKESHIFT_KEEP_SCREENSHOT"])
    img = Image.open(shot).convert("RGB")
    assert img.size[0] == 1400
    counts = img.resize((350, img.size[1] // 4)).getcolors(maxcolors=1 << 24) or []
    ink = sum(n for n, p in counts if min(p) < 200) / sum(n for n, _ in counts)
    colours = {(r // 32, g // 32, b // 32) for _, (r, g, b) in counts}
    assert ink > 0.03 and len(colours) > 20  # lines in many colours, not a blank or broken page


def test_a_model_output_that_opens_a_comment_and_a_script_leaves_the_page_working(tmp_path: Path) -> None:
    browser = find_chromium()
    data = make_suite(tmp_path, per_size=2)
    runs = tmp_path / "runs"
    noisy_predictions(data, runs, "m", 3)
    path = runs / "m" / "id-test.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(dict(r, output="<!--<script>" + r["output"])) + "\n" for r in rows))
    out = tmp_path / "out"
    build_report([RunInput(path, data / "id-test" / "maps.jsonl", {"model": "m"})], out, progress=False)
    res = run_browser(browser, (out / "report.html").as_uri(), tmp_path / "u", "--dump-dom")
    dom = res.stdout
    assert _attr(dom, "data-ready") == "1" and _attr(dom, "data-errors") == "0", res.stderr[-2000:]
    assert int(_attr(dom, "data-visible") or 0) > 0
    assert "&lt;!--&lt;script&gt;" in dom
