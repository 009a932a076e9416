"""The protocol documentation in ``docs/``: every ``spec DED x.y`` / ``spec PED x.y`` citation
names a numbered heading of the matching page, and nothing in the repository points outside it.

Pure text scanning (no imports of dedebate), well under a second.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = {"DED": ROOT / "docs" / "doubly-efficient-debate.md",
        "PED": ROOT / "docs" / "prover-estimator-debate.md"}
# where citations live, and where nothing may point outside the repository
CITING = ("dedebate", "experiments", "bench", "notebooks", "configs", "tests", "README.md")
SELF_CONTAINED = CITING + ("docs",)
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".ipynb", ".toml", ".txt", ".cfg", ".sh"}

_NUM = r"\d+(?:\.\d+)*"
# "spec DED 5.3", "spec PED 3.3, 3.4, 9.4", "spec DED 6-7", "spec DED 5.1/5.5", "spec DED 3 and 9"
# (matched from the literal "pec ", which the regex engine finds fast; the "S"/"s" before it is
# checked in :func:`citations`)
CITATION = re.compile(rf"pec (DED|PED) ({_NUM}(?:(?:, |/| / |-| and ){_NUM})*)")
# The prover-estimator modules also cite the short form "spec 6.3" (every one of them is about
# that protocol): those are checked against the PED page.
BARE = re.compile(rf"pec ()({_NUM}(?:(?:, |/| / |-| and ){_NUM})*)")
HEADING = re.compile(rf"^#{{1,6}} ({_NUM}) \S", re.M)
# built so that this file's own source does not match them
OUTSIDE = re.compile(r"\.\./shared|shared[/]spec|[Ii]ssue #?[0-9]")
OUTSIDE_HINTS = ("shared", "ssue")  # a file without either cannot match (a fast pre-filter)


def numbered_headings(text: str) -> list[str]:
    """The section numbers of a page's headings, in order (``## 5.3 Guarantees`` -> ``5.3``)."""
    return HEADING.findall(text)


def citations(text: str) -> list[tuple[str, str, int]]:
    """``(page, number, line)`` for every section a text cites; a range cites both ends."""
    out = []
    for m in [*CITATION.finditer(text), *BARE.finditer(text)]:
        i = m.start()
        if i == 0 or text[i - 1] not in "Ss" or (i >= 2 and text[i - 2].isalnum()):
            continue  # only the word "spec" / "Spec"
        line = text.count("\n", 0, m.start()) + 1
        for num in re.findall(_NUM, m.group(2)):
            out.append((m.group(1) or "PED", num, line))
    return sorted(out, key=lambda c: c[2])


def unresolved(texts: dict[str, str], sections: dict[str, set[str]]) -> list[str]:
    """``path:line: spec PAGE x.y`` for every citation whose number is not a heading of PAGE."""
    return [f"{path}:{line}: spec {page} {num}"
            for path, text in texts.items()
            for page, num, line in citations(text) if num not in sections[page]]


def outside_pointers(texts: dict[str, str]) -> list[str]:
    """``path:line: match`` for every pointer outside the repository (issue numbers, spec files)."""
    return [f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for path, text in texts.items() if any(h in text for h in OUTSIDE_HINTS)
            for m in OUTSIDE.finditer(text)]


def _texts(roots) -> dict[str, str]:
    files = []
    for name in roots:
        p = ROOT / name
        files += [p] if p.is_file() else sorted(
            f for f in p.rglob("*") if f.suffix in SUFFIXES and "__pycache__" not in f.parts)
    return {str(f.relative_to(ROOT)): f.read_text(encoding="utf-8") for f in files}


def _sections() -> dict[str, set[str]]:
    return {page: set(numbered_headings(path.read_text(encoding="utf-8")))
            for page, path in DOCS.items()}


def test_pages_number_their_sections_in_order():
    for page, path in DOCS.items():
        nums = numbered_headings(path.read_text(encoding="utf-8"))
        assert len(nums) >= 15, (page, nums)
        assert len(set(nums)) == len(nums), f"{page}: duplicate section numbers {nums}"
        keys = [tuple(int(p) for p in n.split(".")) for n in nums]
        assert keys == sorted(keys), f"{page}: sections out of order {nums}"
        # every subsection sits under its parent section
        assert all(n.rpartition(".")[0] in nums for n in nums if "." in n), (page, nums)


def test_readme_and_index_link_the_pages():
    assert "(docs/README.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    assert all(f"({path.name})" in index for path in DOCS.values())


def test_every_spec_citation_resolves_to_a_heading():
    texts = _texts(CITING)
    found = [c for text in texts.values() for c in citations(text)]
    assert len(found) > 150 and {p for p, _, _ in found} == {"DED", "PED"}  # the scan sees them
    assert unresolved(texts, _sections()) == []


def test_a_bad_citation_is_reported():
    ded, ped = "spec " + "DED", "spec " + "PED"  # not citations in this file's own source
    bare = "spec"
    texts = {"good.py": f"ok ({ded} 5.3; {ped} 2.4.1, 9.3-9.5, 8.5 / 10; {bare} 6.3)\n",
             "bad.py": f"x\n({ded} 5.3, 5.9)\n{ped} 6.3 and 11\n{ped} 7.1-7.8\n# {ded} 12\n"
                       f"{bare} 6.9, {bare.title()} 2.4.7; in{bare} 99\n"}
    assert unresolved(texts, _sections()) == [
        f"bad.py:2: {ded} 5.9", f"bad.py:3: {ped} 11", f"bad.py:4: {ped} 7.8",
        f"bad.py:5: {ded} 12", f"bad.py:6: {ped} 6.9", f"bad.py:6: {ped} 2.4.7"]


def test_nothing_points_outside_the_repository():
    assert outside_pointers(_texts(SELF_CONTAINED)) == []
    bad = {"a.py": "see " + "issue" + " 8, " + "Issue" + " #3\nread ../" + "shared/x.md, shared"
                   + "/spec/y.md\n"}
    assert outside_pointers(bad) == [
        "a.py:1: " + "issue" + " 8", "a.py:1: " + "Issue" + " #3", "a.py:2: ../" + "shared",
        "a.py:2: shared" + "/spec"]


# a measured speed-up in code ("2.3x faster", "~20x slower", "about 24x"): figures go stale the
# day they are written; they belong in bench/ output
SPEEDUP = re.compile(r"(?<![\w.])~?\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x (?:faster|slower|the)\b"
                     r"|[Aa]bout \d+(?:\.\d+)?x\b")
SPEEDUP_HINTS = ("x faster", "x slower", "x the", "bout ")  # lines without these cannot match


def speedups(text: str) -> list[str]:
    """Every measured speed-up figure in ``text``."""
    return [m.group(0) for line in text.splitlines() if any(h in line for h in SPEEDUP_HINTS)
            for m in SPEEDUP.finditer(line)]


def test_no_measured_speedups_in_code():
    texts = _texts(("dedebate", "experiments"))
    assert [f"{p}: {s}" for p, t in texts.items() for s in speedups(t)] == []
    bad = "ran 2.3x faster; ~20x slower;\n2-3x faster; About 24x the default; 0x1f; 8x8 grid"
    assert speedups(bad) == ["2.3x faster", "~20x slower", "2-3x faster", "About 24x"]
