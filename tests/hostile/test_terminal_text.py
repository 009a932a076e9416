"""Text from a shared folder cannot drive the reader's terminal: `compare`, `report` and `ls` print
a planted escape sequence (window title, clipboard write, hidden text) or bidi control as its
Python escape, and leave printable text alone."""

from __future__ import annotations

import json

from dedebate import cli
from dedebate.lab.report_render import one_line, printable

TITLE = "\x1b]0;PWNED\x07"  # OSC: set the window title
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: write the clipboard
HIDE = "\x1b[8m"  # SGR 8: hide what follows (a FAIL, say)
BIDI = "\u202e"  # right-to-left override: "LIAF" reads as "FAIL"
RAW = ("\x1b", "\x07", "\u202e")


def test_printable_escapes_control_and_bidi_characters_only():
    assert printable("p = 0.5 — θ ≤ 2/5") == "p = 0.5 — θ ≤ 2/5"
    assert printable(f"a{HIDE}b") == "a\\x1b[8mb"
    assert printable(f"x{BIDI}y") == "x\\u202ey"
    assert printable("two  spaces\tand a tab") == "two  spaces\\tand a tab"
    assert one_line(f" a \n\n b{TITLE} ") == "a b\\x1b]0;PWNED\\x07"


def _reproduce(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["reproduce", "--quick", "--tracking", "disabled", "--no-progress"]
    cli.main([*args, "--output-dir", str(out), "--only", "fake_pass", "fake_fail"])
    capsys.readouterr()
    (rep,) = out.glob("reproduce-*")
    return rep


def _plant(record, experiment: str | None = None) -> None:
    data = json.loads(record.read_text())
    claims = data["claims"] if "claims" in data else data["experiments"][0]["claims"]
    claims[0]["claim"] += TITLE + CLIPBOARD
    claims[0]["note"] = HIDE + "FAIL"
    claims[0]["source"] = BIDI + "LIAF"
    if experiment is not None:
        data["experiment"] = experiment
    record.write_text(json.dumps(data))


def test_compare_report_and_ls_print_planted_escapes_inert(tmp_path, fake_env, capsys):
    rep = _reproduce(tmp_path, capsys)
    _plant(rep / "report.json")
    _plant(rep / "fake_pass" / "results.json", experiment="fake_pass" + HIDE)
    outputs = []
    for argv in (
        ["compare", str(rep), str(rep / "fake_pass")],
        ["report", str(rep)],
        ["ls", str(rep / "fake_pass")],
    ):
        cli.main(argv)
        out = capsys.readouterr()
        outputs.append(out.out + out.err)
    for text in outputs:
        assert not any(c in text for c in RAW), text
    assert "\\x1b]0;PWNED\\x07" in outputs[0]
    # report.md doubles each backslash (Markdown shows one), so none can undo an escape there
    assert "\\\\x1b]0;PWNED\\\\x07" in outputs[1] and "\\\\u202eLIAF" in outputs[1]
    assert "fake_pass\\x1b[8m" in outputs[2]


def test_usage_errors_and_numerics_changes_print_a_shared_folders_text_inert(capsys):
    """A usage error may quote a shared folder (a checkpoint's numerics key, its config hash):
    each line is printed with its escapes, the line breaks kept."""
    from dedebate.cli.common import die_usage
    from dedebate.lab import numerics

    assert die_usage(f"first{TITLE}\nsecond{BIDI}") == 2
    assert capsys.readouterr().err == "dedebate: error: first\\x1b]0;PWNED\\x07\nsecond\\u202e\n"
    (change,) = numerics.changes({f"jax{HIDE}": "0.1"}, {})
    assert not any(c in change for c in RAW) and "jax\\x1b[8m" in change


def test_a_bad_command_line_is_quoted_inert(capsys):
    """An argument the parser refuses (pasted from a shared folder's README, say) is printed with
    its escapes: exit 2, one line."""
    assert cli.main(["ls", f"--x{TITLE}"]) == 2
    err = capsys.readouterr().err
    assert not any(c in err for c in RAW) and "--x\\x1b]0;PWNED\\x07" in err
    assert err.count("\n") == 1


def test_compare_names_a_changed_verdict_inert(tmp_path, fake_env, capsys):
    """The closing line of `compare` names each claim whose verdict changed: a claim text planted
    in both records is printed with its escapes there too."""
    rep = _reproduce(tmp_path, capsys)
    a, b = rep / "fake_pass" / "results.json", tmp_path / "b" / "results.json"
    _plant(a)
    b.parent.mkdir()
    data = json.loads(a.read_text())
    data["claims"][0]["passed"] = False  # the same row, its verdict flipped
    b.write_text(json.dumps(data))
    cli.main(["compare", str(a.parent), str(b.parent)])
    out = capsys.readouterr()
    assert "verdict(s) changed: " in out.out
    assert not any(c in out.out + out.err for c in RAW), out.out
    assert "\\x1b]0;PWNED\\x07" in out.out.split("verdict(s) changed: ")[1]


def test_messages_on_stderr_print_a_shared_folders_text_inert(capsys):
    """Warnings quote a shared folder's text (a sweep's metric names, a figure hook's error):
    :func:`eprint` prints each line with its escapes, the line breaks kept."""
    from dedebate.lab.rundir import eprint

    eprint(f"warning: sweep.metrics names {TITLE}{CLIPBOARD}\nsecond{BIDI}", 3)
    err = capsys.readouterr().err
    assert not any(c in err for c in RAW)
    assert err == (
        "warning: sweep.metrics names \\x1b]0;PWNED\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\n"
        "second\\u202e 3\n"
    )
