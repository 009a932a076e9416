"""``bench/code_stats.py`` counts code and docstring lines exactly, on a tiny tree of known counts."""  # noqa: E501

from __future__ import annotations

import json

from bench.code_stats import Counts, file_counts, main, stats

Q = '"' * 3
# 15 lines: 5 docstring (module 1-3, f's 7, the nested g's 10), 8 code (5, 6, 8, 9, 11, 12-14:
# a string that is not a first statement is code), 1 comment (4), 1 blank (15 is the last)
SOURCE = (
    f"{Q}Module.\n"  # 1 doc
    "\n"  # 2 doc (inside the module docstring)
    f"More.{Q}\n"  # 3 doc
    "# a comment\n"  # 4 comment
    "import os\n"  # 5 code
    "def f(x):\n"  # 6 code
    f"    {Q}One line.{Q}\n"  # 7 doc
    "    y = x  # trailing comment\n"  # 8 code
    "    def g():\n"  # 9 code
    f"        {Q}Nested.{Q}\n"  # 10 doc
    f"    {Q}not a docstring{Q}\n"  # 11 code: not the first statement
    "    return (os.sep,\n"  # 12 code
    f"            {Q}a\n"  # 13 code: a string in code
    f"            b{Q})\n"  # 14 code
    "\n"
)  # 15 blank


def test_file_counts_split_code_docstring_comment_and_blank():
    assert file_counts(SOURCE) == Counts(files=1, lines=15, code=8, doc=5)
    # a class docstring, and a one-line function whose docstring shares a line with code
    src = f"class C:\n    {Q}A class.\n\n    Two lines.{Q}\n    def m(self): {Q}Doc.{Q}\n"
    assert file_counts(src) == Counts(files=1, lines=5, code=2, doc=3)


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_stats_per_package_long_files_and_experiment_lines(tmp_path, capsys):
    _write(tmp_path, "dedebate/__init__.py", f"{Q}Top.{Q}\n")
    _write(tmp_path, "dedebate/core/__init__.py", SOURCE)
    _write(tmp_path, "dedebate/core/sub/deep.py", "x = 1\ny = 2\n")  # subpackages count too
    _write(tmp_path, "dedebate/cli.py", f"{Q}CLI.{Q}\n" + "a = 1\n" * 501)
    _write(tmp_path, "dedebate/lab/__pycache__/x.py", "a = 1\n")  # caches are skipped
    _write(tmp_path, "experiments/e.py", f"{Q}E.{Q}\nz = 3\n")
    _write(tmp_path, "bench/long.py", "b = 1\n" * 600)  # only a long-file candidate
    s = stats(tmp_path)
    u = s["units"]
    assert u["core"] == Counts(files=2, lines=17, code=10, doc=5)
    assert u["cli"] == Counts(files=1, lines=502, code=501, doc=1)
    assert u["dedebate (top level)"] == Counts(files=1, lines=1, code=0, doc=1)
    assert u["experiments"] == Counts(files=1, lines=2, code=1, doc=1)
    assert u["lab"] == Counts() and u["protocols"] == Counts()
    assert s["dedebate"] == Counts(files=4, lines=520, code=511, doc=7)
    assert s["long_files"] == {"dedebate/cli.py": 502, "bench/long.py": 600}
    assert s["experiments_lines"] == 2
    assert main([str(tmp_path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["units"]["core"] == {"files": 2, "lines": 17, "code": 10, "doc": 5}
    assert main([str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "core                       2      17      10       5      0.50\n" in table
    assert "cli                        1     502     501       1      0.00\n" in table
    assert "dedebate (top level)       1       1       0       1      0.00  over half" in table
    assert (
        "files over 500 lines (dedebate, experiments, bench): 2\n    600  bench/long.py\n" in table
    )
