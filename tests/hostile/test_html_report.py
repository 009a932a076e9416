"""``dedebate report DIR --html FILE`` of a hostile ``report.json`` is inert and embeds only the
PNG files inside the report's own folder (dedebate/lab/rerender.py).

The report.json is the one a colleague could share: claim text with a ``"`` that closes an
``href`` and adds ``onmouseover=``, a ``<script>``, a title whose newline forms an image line,
and plot paths that are absolute, climb out with ``../``, link out, or name a file that is not a
PNG. Only the one genuine plot inside the folder is embedded. report.md links no plot that
climbs out of its folder either, and ``dedebate ls`` takes no linked results.json for a record."""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import zlib
from html.parser import HTMLParser

from dedebate import cli

SECRET = b"TOP-SECRET-host-7f3a9c"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def tiny_png() -> bytes:
    """A valid 1x1 grey PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
        + chunk(b"IEND", b"")
    )


class Tags(HTMLParser):
    """Every start tag of a page with its attributes."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def plant_hostile_report(rep, outside):
    """A report folder ``rep`` whose report.json attacks the HTML page, secrets in the folder
    ``outside`` beside it, and one genuine plot; returns (rep, the secret files, the plot)."""
    (rep / "exp" / "plots").mkdir(parents=True)
    outside.mkdir(exist_ok=True)
    secret_png = outside / "secret.png"  # a real PNG signature: only the path may stop it
    secret_png.write_bytes(PNG_SIGNATURE + SECRET)
    secret_txt = outside / "hostname"
    secret_txt.write_bytes(SECRET + b"\n")
    good = tiny_png()
    (rep / "exp" / "plots" / "counts.png").write_bytes(good)
    (rep / "exp" / "plots" / "fake.png").write_bytes(b"<script>alert(1)</script>")
    (rep / "exp" / "plots" / "link.png").symlink_to(secret_png)
    hostile = 'see [this](#x" onmouseover="alert(document.cookie)) <script>alert(2)</script>'
    claim = {
        "claim": hostile,
        "source": '"><img src=x onerror=alert(3)>',
        "bound": "== 1",
        "value": 1,
        "lo": 1,
        "hi": 1,
        "passed": True,
        "note": hostile,
    }
    entry = {
        "name": 'exp"><svg onload=alert(4)>',
        "title": f"hostile\n![x]({secret_png})",
        "status": "ok",
        "run_dir": "exp",
        "claims": [claim],
        "plots": [
            str(secret_png),
            os.path.relpath(secret_png, rep),
            str(secret_txt),
            os.path.relpath(secret_txt, rep),
            "exp/plots/link.png",
            "exp/plots/fake.png",
            "exp/plots/counts.png",
        ],
    }
    (rep / "report.json").write_text(
        json.dumps(
            {
                "provenance": {"size": "quick", "seed": 0},
                "wall_time_s": 1.0,
                "complete": True,
                "experiments": [entry],
            }
        )
    )
    return rep, [secret_png, secret_txt], good


def assert_inert(page: str, secrets, good: bytes) -> None:
    """No script, no handler attribute, links only within the page, and exactly the one
    genuine plot embedded; no byte of an outside secret, plain or in base64."""
    parser = Tags()
    parser.feed(page)
    names = [tag for tag, _ in parser.tags]
    assert "script" not in names and "<script" not in page.lower()
    handlers = [(tag, a) for tag, attrs in parser.tags for a in attrs if a.startswith("on")]
    assert handlers == []
    assert all(attrs["href"].startswith("#") for tag, attrs in parser.tags if "href" in attrs)
    policy = [
        a["content"] for _, a in parser.tags if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy == ["default-src 'none'; img-src data:; style-src 'unsafe-inline'"]
    sources = [attrs["src"] for tag, attrs in parser.tags if "src" in attrs]
    assert sources == ["data:image/png;base64," + base64.b64encode(good).decode()]
    for secret in secrets:
        data = secret.read_bytes()
        assert SECRET.decode() not in page
        assert base64.b64encode(data).decode() not in page
        assert base64.b64encode(SECRET).decode()[:16] not in page


def test_hostile_report_renders_an_inert_self_contained_page(tmp_path, capsys):
    rep, secrets, good = plant_hostile_report(tmp_path / "rep", tmp_path / "outside")
    out = tmp_path / "report.html"
    assert cli.main(["report", str(rep), "--html", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert_inert(out.read_text(), secrets, good)


def test_a_title_cannot_start_a_markdown_line(tmp_path, capsys):
    """``report.md`` keeps a hostile title on its heading line: no image line is formed."""
    rep, (secret_png, _), _ = plant_hostile_report(tmp_path / "rep", tmp_path / "outside")
    assert cli.main(["report", str(rep)]) == 0
    lines = capsys.readouterr().out.splitlines()
    heading = f'## exp">&lt;svg onload=alert(4)> — hostile ![x\\]({secret_png})'
    assert lines.count(heading) == 1
    assert [line for line in lines if line.startswith("![x]")] == []


def test_a_claim_of_brackets_renders_in_linear_time(tmp_path, capsys):
    """A claim of a million ``[``s: the link pattern scanned each to the end (n^2 steps: 38 s at
    80,000, hours here); the page must be written well within the alarm's minute."""
    import signal

    rep, _, _ = plant_hostile_report(tmp_path / "rep", tmp_path / "outside")
    report = json.loads((rep / "report.json").read_text())
    report["experiments"][0]["claims"][0]["claim"] = "[" * 1_000_000
    (rep / "report.json").write_text(json.dumps(report))

    def too_slow(*_):
        raise TimeoutError("report --html took over a minute on a claim of brackets")

    before = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(60)
    try:
        assert cli.main(["report", str(rep), "--html", str(tmp_path / "r.html")]) == 0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert "[" * 1_000_000 in (tmp_path / "r.html").read_text()
    capsys.readouterr()


def test_report_md_shows_a_records_html_links_and_remote_plots_as_text(tmp_path, capsys):
    """A Markdown viewer of report.md loads a remote image and runs a link from a shared record's
    text: tags, links and images in claims, notes, titles and the run directory are shown as text
    (a backslash before "](" or a backtick cannot undo that), and a plot path that is remote,
    absolute, climbs out or holds more than a path gets no image line. Checked by rendering
    report.md as CommonMark with HTML on (markdown-it-py, which flax's rich brings)."""
    from markdown_it import MarkdownIt

    rep, _, _ = plant_hostile_report(tmp_path / "rep", tmp_path / "outside")
    report = json.loads((rep / "report.json").read_text())
    entry = report["experiments"][0]
    entry["claims"][0]["claim"] = 'pixel <img src="https://attacker.example/p.png"> U >= 1/2'
    entry["claims"][0]["note"] = "[click me](javascript:alert(1)) ![b](https://attacker.example/b)"
    entry["claims"][0]["source"] = (
        "x\\](https://attacker.example/s.png) [go\\](https://attacker.example/go)"
    )
    entry["run_dir"] = "exp` <img src=https://attacker.example/dir.png onerror=alert(1)> `"
    entry["plots"] = [
        "https://attacker.example/beacon.png",
        "exp/plots/a.png) <img src=https://attacker.example/q.png> ![b](https://attacker.example/r",
        "exp/plots/counts.png",
    ]
    (rep / "report.json").write_text(json.dumps(report))
    assert cli.main(["report", str(rep)]) == 0
    md = capsys.readouterr().out
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    tags = re.findall(r"<(?:img|a)\b[^>]*>", html)
    assert [t for t in tags if not t.startswith('<a href="#')] == [
        '<img src="exp/plots/counts.png" alt="counts" />'  # the one plot inside the folder
    ]
    assert "U &gt;= 1/2" in html and "&lt;img" in html  # shown as text


def test_a_page_escapes_ampersands_and_quotes_of_shared_text(tmp_path):
    """An entity in a shared note stays text (``&amp;`` is shown, not decoded), and quotes are
    escaped as the page's docstring promises."""
    from dedebate.lab.rerender import markdown, to_html
    from tests.lab.test_report_verdicts import _rep, _row

    row = _row(note='say "hi" &amp; bye')
    page = to_html(
        markdown(_rep(experiments=[{"name": "a", "status": "ok", "claims": [row]}])), tmp_path
    )
    assert "<td>say &quot;hi&quot; &amp;amp; bye</td>" in page


def test_a_pipe_in_shared_text_keeps_the_tables_columns(tmp_path):
    from dedebate.lab.rerender import markdown, to_html
    from tests.lab.test_report_verdicts import _rep, _row

    row = _row(passed=False, note="left | right")
    page = to_html(
        markdown(_rep(experiments=[{"name": "a", "status": "ok", "claims": [row]}])), tmp_path
    )
    assert '<td class="fail">FAIL</td>' in page and "<td>left | right</td>" in page


def test_report_md_links_no_plot_that_climbs_out_of_its_folder():
    from dedebate.lab.report_render import ExperimentEntry, render_markdown
    from tests.lab.test_report_verdicts import _row

    e = ExperimentEntry(name="x", claims=[_row()], plots=["x/../../outside.png"])
    md = render_markdown({}, [e], 0.0)
    assert "(plot x/../../outside.png not shown: not a file inside the report directory)" in md
    assert "](x/../../outside.png)" not in md


def test_ls_takes_no_linked_results_json_for_a_record(tmp_path):
    from dedebate.lab import records
    from tests.lab.test_report_verdicts import _run

    real = _run(tmp_path / "elsewhere")
    (tmp_path / "runs" / "r").mkdir(parents=True)
    os.symlink(real / "results.json", tmp_path / "runs" / "r" / "results.json")
    assert records.find(tmp_path / "runs") == []
