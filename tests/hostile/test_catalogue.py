"""Hostile inputs and what ``dedebate`` answers to each, one row per case.

Each row plants its input in a fresh folder beside ``outside/`` (files that must never change)
and runs the command line in this process. It checks the exit code, that the answer is one
line holding the row's fragment and naming the offending path, and that nothing under
``outside/`` changed (names and bytes). A case that cannot be planted as files (a full disk, a
bug) patches the code instead. Later cases (sync time-outs, signals) add rows to :data:`CASES`."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dedebate import cli
from tests.hostile.test_html_report import assert_inert, plant_hostile_report

EXPERIMENTS = (
    "tests.fake_experiments,tests.fake_experiments.resumable,tests.fake_experiments.sweepable"
)
LINKED = "symbolic link"


@dataclasses.dataclass(frozen=True)
class Case:
    """One hostile input: how to plant it, and what the command must answer."""

    name: str
    plant: Callable[[Path, Path], tuple[list[str], Path | None]]  # (work, outside) -> argv, path
    exit_code: int
    message: str  # a fragment of the one line answered (stderr; stdout for exit 0)
    check: Callable[[Path, Path], None] | None = None  # more to assert afterwards
    patch: Callable[[pytest.MonkeyPatch], None] | None = None  # what cannot be planted as files


def fill_outside(outside: Path) -> None:
    """What a user has outside the run folders: a secret, plots, tables, checkpoints."""
    for rel, data in {
        "secret.txt": "precious\n",
        "plots/counts.png": "precious plot",
        "tables/chunks.csv": "precious,table\n",
        "ckpt/3/meta": "precious step",
        "ckpt/notes.txt": "precious notes",
        "groups/group-000.csv": "a,b\n1,2\n",
        "run/results.json": '{"precious": true}',
    }.items():
        (outside / rel).parent.mkdir(parents=True, exist_ok=True)
        (outside / rel).write_text(data)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a folder), links not followed."""
    out: dict[str, bytes | None] = {}
    for where, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(where, name), root)] = None
        for name in files:
            out[os.path.relpath(os.path.join(where, name), root)] = Path(where, name).read_bytes()
    return out


def run_folder(work: Path, experiment: str, sweep: dict | None, tracking: str = "disabled") -> Path:
    """A run folder holding only its config.yaml (a run that has not finished)."""
    from dedebate.lab.config import dump_yaml, resolve
    from dedebate.lab.registry import discover_experiments

    raw = {
        "experiment": experiment,
        "size": "quick",
        "seed": 0,
        "output_dir": str(work),
        "tracking": {"mode": tracking},
        **({"sweep": sweep} if sweep else {}),
    }
    run = work / "run"
    run.mkdir(parents=True)
    reg = discover_experiments(EXPERIMENTS.split(","))
    (run / "config.yaml").write_text(dump_yaml(resolve(raw, reg.experiments)))
    return run


def linked(experiment: str, entry: str, target: str, sweep: dict | None = None):
    """A case's plant: ``run/ENTRY`` links to ``outside/TARGET``; resume the run."""

    def plant(work: Path, outside: Path):
        run = run_folder(work, experiment, sweep)
        (run / entry).parent.mkdir(parents=True, exist_ok=True)
        (run / entry).symlink_to(outside / target)
        return ["run", "--no-progress", "--resume", str(run)], run / entry

    return plant


def plots_linked_inside(work: Path, outside: Path):
    """The run's plots/ links to another folder of the run; resume the run."""
    run = run_folder(work, "fake_pass", None)
    (run / "figures").mkdir()
    (run / "plots").symlink_to("figures")
    return ["run", "--no-progress", "--resume", str(run)], run / "plots"


def lock_hard_linked(work: Path, outside: Path):
    """The run's lock file is a hard link to an outside file; resume the run."""
    run = run_folder(work, "fake_pass", None)
    os.link(outside / "secret.txt", run / ".lock")
    return ["run", "--no-progress", "--resume", str(run)], run / ".lock"


def reproduce_linked(work: Path, outside: Path):
    """A reproduce folder whose experiment folder links out; resume it."""
    rep = work / "rep"
    rep.mkdir()
    (rep / "report.json").write_text(
        json.dumps({"provenance": {"size": "quick", "seed": 0}, "experiments": []})
    )
    (rep / "fake_pass").symlink_to(outside / "run")
    return (
        [
            "reproduce",
            "--resume",
            str(rep),
            "--only",
            "fake_pass",
            "--tracking",
            "disabled",
            "--no-progress",
        ],
        rep / "fake_pass",
    )


def hostile_html(work: Path, outside: Path):
    """A shared report.json that attacks the HTML page (tests/hostile/test_html_report.py)."""
    rep, _, _ = plant_hostile_report(work / "rep", outside)
    return ["report", str(rep), "--html", str(work / "page.html")], None


def html_is_inert(work: Path, outside: Path) -> None:
    page = (work / "page.html").read_text()
    assert_inert(
        page,
        [outside / "secret.png", outside / "hostname"],
        (work / "rep" / "exp" / "plots" / "counts.png").read_bytes(),
    )


def override(key: str, value: str):
    """A case's plant: run fake_sweep with ``params.KEY=VALUE`` on the command line."""

    def plant(work: Path, outside: Path):
        cfg = work / "fake_sweep.yaml"
        cfg.write_text(f"experiment: fake_sweep\nsize: quick\noutput_dir: {work}\n")
        return ["run", str(cfg), "tracking.mode=disabled", f"params.{key}={value}"], None

    return plant


def million_rows(work: Path, outside: Path):
    """A sweep of 1,000 points x 1,000 seeds (each value of its own within range)."""
    cfg = work / "big_sweep.yaml"
    cfg.write_text(
        f"experiment: fake_sweep\nsize: quick\noutput_dir: {work}\nsweep:\n"
        f"  seeds: 1000\n  axes:\n    p: [{', '.join(str(i / 1000) for i in range(1000))}]\n"
    )
    return ["sweep", str(cfg), "tracking.mode=disabled"], None


def ogd_run(*overrides: str):
    """A case's plant: ``dedebate run ogd_estimator`` with ``overrides`` (a shipped config)."""

    def plant(work: Path, outside: Path):
        return [
            "run",
            "ogd_estimator",
            *overrides,
            f"output_dir={work}",
            "tracking.mode=disabled",
            "--no-progress",
        ], None

    return plant


def ogd_sweep(work: Path, outside: Path):
    """An ogd_estimator sweep: 256 seeds x 16 deltas of 20,000 contexts in one static group."""
    cfg = work / "ogd_sweep.yaml"
    cfg.write_text(
        f"experiment: ogd_estimator\noutput_dir: {work}\nsweep:\n  seeds: 256\n"
        "  axes:\n    n_x: [20000]\n    deltas: ["
        + ", ".join(f"[{(i + 1) / 100}]" for i in range(16))
        + "]\n"
    )
    return ["sweep", str(cfg), "tracking.mode=disabled", "--no-progress"], None


def machine_of(gib: int):
    """A case's patch: ogd_estimator registered, and a machine with ``gib`` GiB available (the
    real one: the refusal comes before any work, whatever the machine)."""

    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("DEDEBATE_EXPERIMENTS", f"{EXPERIMENTS},experiments.ogd_estimator")
        monkeypatch.setattr("dedebate.lab.memory.available_bytes", lambda: gib * 2**30)

    return patch


ROW = {"claim": "c", "source": "s", "bound": "== 1", "value": 1, "lo": 1, "hi": 1, "passed": True}
GOOD_REPORT = json.dumps(
    {
        "provenance": {"size": "quick", "seed": 0},
        "experiments": [{"name": "fake_pass", "claims": [ROW]}],
    }
)
REPORT_MD = "# a report someone kept\n"


def stored(report_json: str, command: str):
    """A case's plant: ``rep/report.json`` holds REPORT_JSON (beside a report.md); run COMMAND
    on it: ``compare`` (with a good report), ``report``, ``html`` (report --html) or
    ``reproduce`` (--resume)."""

    def plant(work: Path, outside: Path):
        rep, good = work / "rep", work / "good"
        for folder, text in ((rep, report_json), (good, GOOD_REPORT)):
            folder.mkdir(parents=True)
            (folder / "report.json").write_text(text)
            (folder / "report.md").write_text(REPORT_MD)
        argv = {
            "compare": ["compare", str(rep), str(good)],
            "report": ["report", str(rep)],
            "html": ["report", str(rep), "--html", str(work / "page.html")],
            "reproduce": [
                "reproduce",
                "--resume",
                str(rep),
                "--only",
                "fake_pass",
                "--tracking",
                "disabled",
                "--no-progress",
            ],
        }[command]
        return argv, rep / "report.json"

    return plant


def report_with(**row) -> str:
    """report.json of one experiment whose one claim row is ROW with ``row``'s fields (a value
    None drops the field)."""
    claim = {k: v for k, v in {**ROW, **row}.items() if v is not None}
    return json.dumps(
        {
            "provenance": {"size": "quick", "seed": 0},
            "experiments": [{"name": "fake_pass", "claims": [claim]}],
        }
    )


def report_untouched(work: Path, outside: Path) -> None:
    assert (work / "rep" / "report.json").read_text() == BAD_SIZE
    assert (work / "rep" / "report.md").read_text() == REPORT_MD
    assert sorted(p.name for p in (work / "rep").iterdir()) == ["report.json", "report.md"]


def compare_crashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug: building compare's table raises."""

    def bug(a, b):
        raise RuntimeError("a bug")

    monkeypatch.setattr("dedebate.lab.compare.change_evidence", bug)


def two_good_reports(work: Path, outside: Path):
    argv, _ = stored(GOOD_REPORT, "compare")(work, outside)
    return argv, work / "rep"


def disk_full(method: str, err: Exception):
    """A case's patch: Orbax's ``CheckpointManager.METHOD`` raises ERR, as it does on a full
    disk. Simulated: filling a real disk needs a small file system mounted (root), and Orbax
    raises these errors as they are here (checked by hand on a 64 KiB tmpfs)."""

    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        import orbax.checkpoint as ocp

        def full(*args, **kwargs):
            raise err

        monkeypatch.setattr(ocp.CheckpointManager, method, full)

    return patch


def checkpointed_run(work: Path, outside: Path):
    """A fake_ckpt run folder, resumed (its chunks save a checkpoint each)."""
    run = run_folder(work, "fake_ckpt", None)
    return ["run", "--no-progress", "--resume", str(run)], run / "checkpoints"


DEEP = "[" * 100_000
HUGE = '{"experiments": [], "x": ' + "9" * 5000 + "}"
BAD_SIZE = json.dumps({"provenance": {"size": "huge", "seed": 0}, "experiments": []})
ORBAX_FULL = ValueError(
    'RESOURCE_EXHAUSTED: Error writing local file "ckpt/_sharding": '
    "Failed to write 238 bytes to file 18: No space left on device "
    "[os_error_code='28']"
)
SWEEP = {"seeds": 1, "axes": {"p": [0.5]}}
CASES = [
    Case("lock file links out", linked("fake_pass", ".lock", "secret.txt"), 2, LINKED),
    Case("lock file links inside", linked("fake_pass", ".lock", "../run/config.yaml"), 2, LINKED),
    Case("lock file is a hard link out", lock_hard_linked, 2, "not a regular file"),
    Case("plots/ links out", linked("fake_pass", "plots", "plots"), 2, LINKED),
    Case("plots/ links inside the run", plots_linked_inside, 2, LINKED),
    Case("tables/ links out", linked("fake_pass", "tables", "tables"), 2, LINKED),
    Case("a plot file links out", linked("fake_pass", "plots/counts.png", "secret.txt"), 2, LINKED),
    Case("checkpoints/ links out", linked("fake_ckpt", "checkpoints", "ckpt"), 2, LINKED),
    Case("a sweep's groups/ links out", linked("fake_sweep", "groups", "groups", SWEEP), 2, LINKED),
    Case("a reproduce experiment folder links out", reproduce_linked, 2, LINKED),
    Case("a shared report.json attacks its HTML page", hostile_html, 0, "wrote", html_is_inert),
    Case(
        "an integer of 5,000 digits",
        override("n", "9" * 5000),
        2,
        "an integer of 5000 digits (at most 100)",
    ),
    Case(
        "a float beyond float32",
        override("threshold", "1e308"),
        2,
        "params.threshold=1e+308: expected a finite number of at most 3.402823e+38",
    ),
    Case(
        "a float that is not a number",
        override("threshold", ".nan"),
        2,
        "params.threshold=nan: expected a finite number",
    ),
    Case(
        "a sweep of a million rows",
        million_rows,
        2,
        "axes x seeds = 1000000 rows, over max_rows=100000: shrink the grid, or raise "
        "sweep.max_rows",
    ),
    Case(
        "a run whose counts (each within range) need 159 GiB",
        ogd_run("params.n_x=20000", "params.n_tests=4096", "params.q_values=[5]"),
        2,
        "ogd_estimator needs about 159 GiB of memory (estimated from its sizes; largest term: "
        "float64 recheck of the exit h, 156 GiB), more than the 8 GiB available on this "
        "machine; shrink its sizes, or set memory_limit=BYTES (e.g. memory_limit=160GiB) to run "
        "it anyway",
        patch=machine_of(8),
    ),
    Case(
        "a run over an explicit memory_limit",
        ogd_run("size=quick", "memory_limit=100KiB"),
        2,
        "more than the 100 KiB allowed by memory_limit=100KiB",
        patch=machine_of(8),
    ),
    Case(
        "a sweep group of 4,096 rows at once that cannot fit",
        ogd_sweep,
        2,
        "ogd_estimator sweep (4096 row(s) at once, at n_x=20000) needs about",
        patch=machine_of(8),
    ),
    Case(
        "a memory_limit that is no size",
        ogd_run("memory_limit=lots"),
        2,
        "config error: memory_limit='lots': must be auto, a number of bytes >= 1, or a size "
        "with a unit (e.g. 512MiB, 64G, 1.5TB)",
        patch=machine_of(8),
    ),
    Case(
        "compare: JSON nested 100,000 deep",
        stored(DEEP, "compare"),
        2,
        "not a readable JSON result (nested too deeply to read)",
    ),
    Case(
        "report: JSON nested 100,000 deep",
        stored(DEEP, "report"),
        2,
        "not readable JSON (nested too deeply to read)",
    ),
    Case(
        "report --html: JSON nested 100,000 deep",
        stored(DEEP, "html"),
        2,
        "not readable JSON (nested too deeply to read)",
    ),
    Case(
        "reproduce --resume: JSON nested 100,000 deep",
        stored(DEEP, "reproduce"),
        2,
        "report.json: nested too deeply to read",
    ),
    Case(
        "compare: a JSON integer of 5,000 digits",
        stored(HUGE, "compare"),
        2,
        "(an integer of 5000 digits (at most 4300))",
    ),
    Case(
        "report: a JSON integer of 5,000 digits",
        stored(HUGE, "report"),
        2,
        "(an integer of 5000 digits (at most 4300))",
    ),
    Case(
        "reproduce --resume: a JSON integer of 5,000 digits",
        stored(HUGE, "reproduce"),
        2,
        "report.json: an integer of 5000 digits (at most 4300)",
    ),
    Case(
        "compare: an experiment that is a number",
        stored('{"experiments": [1]}', "compare"),
        2,
        "not a readable result (experiments[0] is a number, not an experiment (an object))",
    ),
    Case(
        "report: claims that are an object",
        stored('{"experiments": [{"name": "e", "claims": {"c": 1}}]}', "report"),
        2,
        "not a dedebate report (experiments[0].claims is an object, not an array of claim rows)",
    ),
    Case(
        "report --html: a claim row without its source",
        stored(report_with(source=None), "html"),
        2,
        "not a dedebate report (experiments[0].claims[0] has no source)",
    ),
    Case(
        "report: a p-value that is a string",
        stored(report_with(p_value="0.5"), "report"),
        2,
        "experiments[0].claims[0].p_value is a string, not a number within float range or null",
    ),
    Case(
        "compare: a count of 10^20 trials",
        stored(report_with(k=1, n=10**20), "compare"),
        2,
        "experiments[0].claims[0].n is an integer of 21 digits, not a count (an integer in "
        "[0, 2^63)) or null",
    ),
    Case(
        "reproduce --resume: a stored size that is no size",
        stored(BAD_SIZE, "reproduce"),
        2,
        "its provenance.size 'huge' is not one of quick, default, full; the report is left "
        "as it is",
        report_untouched,
    ),
    Case(
        "compare: a bug is exit 2, never 1 (a verdict changed)",
        two_good_reports,
        2,
        "failed: RuntimeError: a bug (a bug in dedebate: please report it)",
        patch=compare_crashes,
    ),
    Case(
        "a full disk during a checkpoint save",
        checkpointed_run,
        2,
        "cannot save a checkpoint: No space left on device",
        patch=disk_full("save", OSError(errno.ENOSPC, "No space left on device", "ckpt")),
    ),
    Case(
        "a full disk quota during a checkpoint save",
        checkpointed_run,
        2,
        "cannot save a checkpoint: Disk quota exceeded",
        patch=disk_full("save", OSError(errno.EDQUOT, "Disk quota exceeded", "ckpt")),
    ),
    Case(
        "a full disk as Orbax wraps it, when the saves finish",
        checkpointed_run,
        2,
        "cannot save a checkpoint: No space left on device",
        patch=disk_full("wait_until_finished", ORBAX_FULL),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input(case, tmp_path, fake_env, capsys):
    fake_env.setenv("DEDEBATE_EXPERIMENTS", EXPERIMENTS)
    work, outside = tmp_path / "work", tmp_path / "work" / "outside"
    outside.mkdir(parents=True)
    fill_outside(outside)
    argv, path = case.plant(work, outside)
    if case.patch is not None:
        case.patch(fake_env)
    before = snapshot(outside)
    capsys.readouterr()
    code = cli.main(argv)
    out, err = capsys.readouterr()
    answer = (out if case.exit_code == 0 else err).strip()
    assert code == case.exit_code, (out, err)
    assert len(answer.splitlines()) == 1 and case.message in answer, answer
    if path is not None:
        assert str(path) in answer
    assert snapshot(outside) == before
    if case.check is not None:
        case.check(work, outside)
