"""The HTML report (issue 12): one self-contained file, opened in a real headless Chromium: no
console errors, a screenshot that is not blank, every plot present, no request leaves the file;
and user text escaped in HTML and Markdown."""
from __future__ import annotations

import http.server
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import fixture, memsleuth

CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (Debian package chromium; "
                                                              "`make test` installs it as root)")
HOSTILE = "<script>alert(1)</script> |pipe| `tick` [/]\nsecond line"


def open_in_chromium(html, tmp_path) -> tuple[str, str, bytes]:
    """(the DOM after load, the browser's log, a screenshot PNG)."""
    base = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
            "--window-size=1280,2400"]
    url = html.resolve().as_uri()
    dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    png = tmp_path / "shot.png"
    shot = subprocess.run(base + [f"--screenshot={png}", url], capture_output=True, text=True, timeout=120)
    return dom.stdout, dom.stderr + shot.stderr, png.read_bytes()


def assert_self_contained(text: str) -> None:
    # Nothing that could make a request: no external URL in any src/href, no script at all.
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//|file:)""", text, re.I)
    assert "<script" not in text.lower()
    assert "@import" not in text and "url(" not in text.replace("url(#", "")
    # every SVG's text is plain: no mathtext left for the browser to print as it is
    assert "mathdefault" not in text and not re.search(r"<text[^>]*>[^<]*\$", text)


def assert_renders(html, tmp_path, min_plots: int) -> None:
    dom, log, png = open_in_chromium(html, tmp_path)
    assert dom.count("<svg") >= min_plots, "a plot is missing from the rendered page"
    for bad in ("Uncaught", "Refused to load", "Refused to connect", "net::ERR", "Content Security Policy"):
        assert bad not in log, [line for line in log.splitlines() if bad in line]
    import matplotlib.image
    import io
    img = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert img.std() > 0.05, "the screenshot is blank"


@needs_chromium
def test_demo_report_in_a_real_browser(tmp_path):
    html = tmp_path / "demo.html"
    proc = memsleuth("compare", "--param", "iterations=100000", "--param", "ws=400,4000", "--reps", "6",
                     "--db", str(tmp_path / "d.db"), "--html", str(html))
    assert proc.returncode == 0, proc.stderr
    text = html.read_text()
    assert_self_contained(text)
    assert len(text.encode()) < 2 << 20
    # throughput with CIs, the ratio heatmap
    assert text.count("<svg") >= 2
    assert_renders(html, tmp_path, 2)


@needs_chromium
def test_failing_cell_and_check_reports_in_a_real_browser(tmp_path):
    html = tmp_path / "fail.html"
    proc = memsleuth("compare", "--alloc", f"glibc,crash={fixture('libfx-nomalloc.so')}", "--reps", "2",
                     "--db", str(tmp_path / "f.db"), "--html", str(html), "--", fixture("plain-leak"), "60")
    assert proc.returncode == 0, proc.stderr
    text = html.read_text()
    assert "PRELOAD-FAILED" in text and "Memory over time" in text  # plain-leak runs ~0.3 s
    assert_self_contained(text)
    assert_renders(html, tmp_path, 2)
    check = tmp_path / "check.html"
    proc = memsleuth("check", "--no-where", "--db", str(tmp_path / "c.db"), "--html", str(check), "--",
                     fixture("plain-steps"), "10")
    assert proc.returncode == 0, proc.stderr
    assert "Timeline (median run)" in check.read_text()
    assert_renders(check, tmp_path, 1)


@needs_chromium
def test_diff_report_in_a_real_browser(tmp_path):
    db = str(tmp_path / "x.db")
    for _ in range(2):
        assert memsleuth("compare", "--alloc", "glibc", "--param", "iterations=50000", "--param", "ws=100",
                         "--reps", "6", "--db", db).returncode == 0
    html = tmp_path / "diff.html"
    proc = memsleuth("diff", "1", "2", "--db", db, "--html", str(html))
    assert proc.returncode in (0, 1), proc.stderr
    assert "B / A time" in html.read_text()
    assert_renders(html, tmp_path, 1)


def test_user_text_is_escaped_in_html_and_markdown(tmp_path):
    db = str(tmp_path / "e.db")
    html, md = tmp_path / "e.html", tmp_path / "e.md"
    script = f"echo '{HOSTILE}' >&2; exit 1"
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "2", "--db", db, "--html", str(html), "--md", str(md),
                     "--", "sh", "-c", script, HOSTILE)
    assert proc.returncode == 3, proc.stderr
    for path in (html, md):
        text = path.read_text()
        assert "<script>" not in text, path
        assert "&lt;script&gt;" in text, path
    assert_self_contained(html.read_text())
    mtext = md.read_text()
    assert "\\|pipe\\|" in mtext and "\\`tick\\`" in mtext
    for line in mtext.splitlines():
        if line.startswith("|"):
            assert line.rstrip().endswith("|"), line
    # A diff across two commands puts the hostile command into a plot's labels (SVG text).
    ok = memsleuth("compare", "--alloc", "glibc", "--reps", "2", "--db", db, "--", "sh", "-c", "true", HOSTILE)
    assert ok.returncode == 0, ok.stderr
    d = tmp_path / "d.html"
    memsleuth("diff", "1", "2", "--db", db, "--html", str(d))
    assert "<script>" not in d.read_text()


def test_report_files_get_ordinary_permissions(tmp_path):
    html = tmp_path / "p.html"
    assert memsleuth("compare", "--alloc", "glibc", "--param", "iterations=20000", "--param", "ws=10", "--reps", "2",
                     "--db", str(tmp_path / "p.db"), "--html", str(html)).returncode == 0
    assert html.stat().st_mode & 0o044 == 0o044


@needs_chromium
def test_check_answers_first_at_80_columns_with_flame_graphs_and_a_pprof_profile(tmp_path):
    """A leak beside a buffer freed per request: piped at COLUMNS=80 the answer is in the first 8
    lines and no line is wider; the HTML opens with it and draws a flame graph per stack set; the
    --pprof profile reads back in `go tool pprof` with the leak's line."""
    page, prof, scope = tmp_path / "check.html", tmp_path / "check.pb.gz", tmp_path / "check.speedscope.json"
    proc = memsleuth("check", "--db", str(tmp_path / "c.db"), "--html", str(page), "--pprof", str(prof),
                     "--speedscope", str(scope), "--", fixture("plain-leak_request"), "100000", columns="80")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(x) for x in lines) <= 80, [x for x in lines if len(x) > 80][:3]
    head = " ".join(lines[:8])
    assert "Live heap grows" in head and "leak_request.c:14" in head and "change:" in head, lines[:8]
    text = page.read_text()
    assert_self_contained(text)
    body = text[text.index("<body>"):]
    assert body.index('class="answer"') < body.index("<h2>")
    assert text.count('class="figure flame"') >= 4        # page faults, allocated, live at the peak and at exit
    assert not re.search(r"(?<![\w.])-\d[\d.,]* (B|KiB|MiB|GiB)\b", re.sub(r"<[^>]+>", " ", text))
    assert_renders(page, tmp_path, 5)
    shown_in_speedscope(scope, tmp_path)
    go = shutil.which("go") or ("/usr/local/go/bin/go" if shutil.which("/usr/local/go/bin/go") else None)
    if go is None:
        pytest.skip("no Go toolchain for `go tool pprof` (golang-go)")
    # recent Go (1.26 here) ships no pprof binary: `go tool pprof` builds it first (into the session's build cache,
    # conftest's XDG_CACHE_HOME), which took over 120 s beside two busy loops
    top = subprocess.run([go, "tool", "pprof", "-top", "-lines", "-sample_index=inuse_space_exit", str(prof)],
                         capture_output=True, text=True, timeout=600, env={**os.environ, "HOME": str(tmp_path)})
    assert top.returncode == 0, top.stderr
    assert re.search(r"\bmain .*leak_request\.c:14", top.stdout), top.stdout
    # every heap sample type: the program's function holds the flat cost, not memsleuth's preload, and
    # the C library's frames are named, not "libc.so.6"
    for kind in ("alloc_space", "inuse_space_peak", "inuse_space_exit"):
        traces = subprocess.run([go, "tool", "pprof", "-traces", f"-sample_index={kind}", str(prof)],
                                capture_output=True, text=True, timeout=600, env={**os.environ, "HOME": str(tmp_path)})
        assert traces.returncode == 0, traces.stderr
        frames = [x.split()[-1] for x in traces.stdout.splitlines() if x.startswith(" ") and x.split()]
        assert "main" in frames and "__libc_start_call_main" in frames, (kind, traces.stdout[-2000:])
        assert not any("libmsheap" in f or f.endswith(".so.6") for f in frames), (kind, traces.stdout[-2000:])


SPEEDSCOPE = Path(os.environ.get("MEMSLEUTH_TEST_FIXTURES", "build/test")) / "speedscope"


def shown_in_speedscope(path, tmp_path) -> None:
    """Opens a --speedscope file in speedscope itself (its npm release, which `make test` fetches),
    served over HTTP as speedscope loads a profile by URL, once per profile (the file's active one),
    in its sandwich view, whose table lists the profile's functions: every profile is listed, each
    shows functions, memsleuth's own frames in none of the events' or the heap's, and the program's
    main in the page faults' and the heap's."""
    import json
    import threading
    import urllib.parse
    from functools import partial
    if not (SPEEDSCOPE / "index.html").exists():
        pytest.skip(f"speedscope's release is not in {SPEEDSCOPE} (`make test` fetches it from the npm registry)")
    site = tmp_path / "speedscope"
    shutil.copytree(SPEEDSCOPE, site)
    doc = json.loads(path.read_text())
    names = [p["name"] for p in doc["profiles"]]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for k, name in enumerate(names):
            (site / f"p{k}.json").write_text(json.dumps({**doc, "activeProfileIndex": k}))
            url = f"http://127.0.0.1:{server.server_port}/p{k}.json"
            dom = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                                  f"--user-data-dir={tmp_path / 'scope-profile'}", "--virtual-time-budget=10000",
                                  "--dump-dom", f"http://127.0.0.1:{server.server_port}/index.html#profileURL="
                                  f"{urllib.parse.quote(url, safe='')}&view=sandwich"],
                                 capture_output=True, text=True, timeout=180).stdout
            assert f"({k + 1}/{len(names)})" in dom and all(n in dom for n in names), (name, dom[-2000:])
            functions = re.findall(r"</span>([^<]+)</td>", dom)
            files = re.findall(r'<td title="([^"]*)"', dom)
            assert functions, (name, dom[-2000:])
            if not name.startswith("CPU time"):
                assert not any(re.search(r"(^|/)(libms(heap|sites)\.so|ms_\w+\.c)$", f) for f in files), (name, files)
            if name in ("page faults", "allocated bytes", "live at the peak", "live at exit"):
                assert "main" in functions, (name, functions)
    finally:
        server.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:     # no request lines on the test's stderr
        pass


def test_piped_output_without_columns_has_the_documented_width(tmp_path):
    proc = memsleuth("check", "--no-where", "--db", str(tmp_path / "c.db"), "--", fixture("plain-steps"), "10",
                     columns=None)
    assert proc.returncode == 0, proc.stderr
    from memsleuth.cli import PIPED_WIDTH
    widest = max(len(x) for x in proc.stdout.splitlines())
    assert 80 < widest <= PIPED_WIDTH, widest


@needs_chromium
def test_stored_case_and_check_reports_in_a_real_browser(tmp_path):
    """The case and check report kinds, from the stored runs the unit tests read (tests/data), each
    opened in Chromium: the answer (or the case's evidence) before the first table."""
    from pathlib import Path
    data = Path(__file__).resolve().parents[1] / "data"
    # thread-heap's panels are all flat (left out, and said so): that case has tables only
    for name, first, plots in (("case-thread-heap.db", "What the evidence shows", 0),
                               ("check-leak-request.db", "answer", 5)):
        db = tmp_path / name
        shutil.copy(data / name, db)
        page = tmp_path / f"{name}.html"
        proc = memsleuth("show", "1", "--db", str(db), "--html", str(page))
        assert proc.returncode == 0, proc.stderr
        text = page.read_text()
        assert_self_contained(text)
        body = text[text.index("<body>"):]
        assert body.index(first) < body.index("<table"), name
        assert_renders(page, tmp_path, plots)
