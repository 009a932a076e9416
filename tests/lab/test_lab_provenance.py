"""Provenance names the code that ran: a wheel in a virtual environment inside some other git
repository records its version, not that repository's commit; an editable install records its
checkout's commit, dirty with an untracked file. argv, host, batch job, x64 and the requested
platforms are recorded, and a resumed run continues its W&B run, whose config holds all of it."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import jax
import pytest

import dedebate
from dedebate import cli
from dedebate.lab.provenance import environment_provenance
from dedebate.lab.schema import validation_errors
from dedebate.lab.sync import by_run_id, run_id


def git(where, *args):
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=where,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def checkout(path, files):
    """A git repository at ``path`` with ``files`` ({relative path: text}) in one commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", ".")
    git(path, "commit", "-qm", "one")
    return git(path, "rev-parse", "HEAD")


def venv_install(project, direct_url=None):
    """dedebate "installed" into ``project/.venv`` (its files and dist-info, PEP 610
    ``direct_url.json`` when given); returns its site-packages folder."""
    site = project / ".venv" / "lib" / "python3" / "site-packages"
    (site / "dedebate").mkdir(parents=True)
    (site / "dedebate" / "__init__.py").write_text('__version__ = "0.1.0"\n')
    info = site / "dedebate-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dedebate\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return site


def running_from(monkeypatch, site, init):
    """As if ``init`` were the imported dedebate, ``site`` first on the path."""
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(dedebate, "__file__", str(init))


WHEEL = "file:///tmp/dedebate-0.1.0-py3-none-any.whl"
PINNED = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    "direct_url, kind, commit",
    [
        (None, "package", None),  # from an index, or a plain wheel: the version names the code
        ({"url": WHEEL, "archive_info": {}}, "archive", None),
        ({"url": "file:///src/dedebate", "dir_info": {}}, "directory", None),
        (
            {
                "url": "https://example.org/dedebate.git",
                "vcs_info": {"vcs": "git", "commit_id": PINNED},
            },
            "vcs",
            PINNED,
        ),
        (  # only git's commit is a git_commit
            {"url": "https://hg.example/d", "vcs_info": {"vcs": "hg", "commit_id": "abc"}},
            "vcs",
            None,
        ),
    ],
)
def test_installed_copy_inside_another_repository_is_not_that_commit(
    tmp_path, monkeypatch, direct_url, kind, commit
):
    project = tmp_path / "project"
    outer = checkout(project, {".gitignore": ".venv/\n", "train.py": "x = 1\n"})
    site = venv_install(project, direct_url)
    running_from(monkeypatch, site, site / "dedebate" / "__init__.py")
    prov = environment_provenance()
    assert prov["git_commit"] == commit != outer
    assert prov["git_dirty"] is None
    assert prov["install"] == {"kind": kind, "url": (direct_url or {}).get("url")}
    assert prov["dedebate_version"] == dedebate.__version__


def test_editable_install_records_its_checkout_and_untracked_files_make_it_dirty(
    tmp_path, monkeypatch
):
    project = tmp_path / "project"
    checkout(project, {".gitignore": ".venv/\n", "train.py": "x = 1\n"})
    src = tmp_path / "dedebate-src"
    head = checkout(src, {".gitignore": "runs/\n", "dedebate/__init__.py": "x = 1\n"})
    site = venv_install(project, {"url": src.as_uri(), "dir_info": {"editable": True}})
    running_from(monkeypatch, site, src / "dedebate" / "__init__.py")
    prov = environment_provenance()
    assert (prov["git_commit"], prov["git_dirty"]) == (head, False)
    (src / "runs").mkdir()
    (src / "runs" / "results.json").write_text("{}")  # ignored run outputs do not count
    assert environment_provenance()["git_dirty"] is False
    (src / "dedebate" / "new_module.py").write_text("y = 2\n")  # untracked code does
    assert environment_provenance()["git_dirty"] is True
    assert prov["install"] == {"kind": "editable", "url": src.as_uri()}


def test_a_checkout_that_shadows_an_installed_wheel_is_what_runs(tmp_path, monkeypatch):
    """A wheel installed in the environment, the code imported from a checkout before it on the
    path (``PYTHONPATH``): the checkout's commit, not the wheel's version."""
    project = tmp_path / "project"
    checkout(project, {".gitignore": ".venv/\n", "train.py": "x = 1\n"})
    src = tmp_path / "dedebate-src"
    head = checkout(src, {"dedebate/__init__.py": "x = 1\n"})
    site = venv_install(project)
    running_from(monkeypatch, site, src / "dedebate" / "__init__.py")
    prov = environment_provenance()
    assert (prov["git_commit"], prov["git_dirty"]) == (head, False)
    assert prov["install"] == {"kind": "source tree", "url": None}


@pytest.mark.parametrize("install", ["editable", "vcs"])
def test_an_untracked_copy_that_runs_is_not_the_installed_distribution(
    tmp_path, monkeypatch, install
):
    """The distribution installed (an editable checkout elsewhere, or a pinned git wheel) is not
    what runs when the imported package is another, untracked copy: no commit, no URL."""
    project = tmp_path / "project"
    src = tmp_path / "dedebate-src"
    checkout(src, {"dedebate/__init__.py": "x = 1\n"})
    direct = {
        "editable": {"url": src.as_uri(), "dir_info": {"editable": True}},
        "vcs": {
            "url": "https://example.org/d.git",
            "vcs_info": {"vcs": "git", "commit_id": PINNED},
        },
    }[install]
    site = venv_install(project, direct)
    copy = tmp_path / "copy" / "dedebate"
    copy.mkdir(parents=True)
    (copy / "__init__.py").write_text("x = 1\n")
    running_from(monkeypatch, site, copy / "__init__.py")
    prov = environment_provenance()
    assert (prov["git_commit"], prov["git_dirty"]) == (None, None)
    assert prov["install"] == {"kind": "source tree", "url": None}


@pytest.mark.parametrize("text", ["[1]", "{oops", "null"])
def test_a_malformed_direct_url_is_a_plain_package(tmp_path, monkeypatch, text):
    """Provenance never stops a run: a ``direct_url.json`` that is no JSON object names nothing."""
    site = venv_install(tmp_path / "project")
    (site / "dedebate-0.1.0.dist-info" / "direct_url.json").write_text(text)
    running_from(monkeypatch, site, site / "dedebate" / "__init__.py")
    assert environment_provenance()["install"] == {"kind": "package", "url": None}


def test_an_egg_info_beside_a_checkout_is_no_install(tmp_path):
    """``pip install -e`` of old, or ``setup.py develop``, leaves ``dedebate.egg-info`` in the
    checkout: the code is the checkout's (a source tree), with its commit."""
    import importlib.metadata

    from dedebate.lab.provenance import code_provenance

    src = tmp_path / "dedebate-src"
    head = checkout(src, {".gitignore": "*.egg-info/\n", "dedebate/__init__.py": "x = 1\n"})
    egg = src / "dedebate.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: dedebate\nVersion: 0.1.0\n")
    prov = code_provenance(src / "dedebate", importlib.metadata.PathDistribution(egg))
    assert prov == {
        "git_commit": head,
        "git_dirty": False,
        "install": {"kind": "source tree", "url": None},
    }


def test_the_device_kinds_are_recorded():
    assert environment_provenance()["devices"] == sorted({d.device_kind for d in jax.devices()})


def test_argv_host_batch_job_x64_and_platforms_recorded(tmp_path, cli_env):
    env = {
        **cli_env,
        "JAX_PLATFORMS": "cpu",
        "JAX_ENABLE_X64": "1",
        "SLURM_JOB_ID": "4242",
        "PBS_JOBID": "17.server",
        "LSB_JOBID": "",
        "JOB_ID": "",
    }
    code = (
        "import json, sys; from dedebate.lab.provenance import environment_provenance; "
        "print(json.dumps(environment_provenance()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "alpha", "--beta"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    prov = json.loads(out.stdout.splitlines()[-1])
    assert prov["argv"] == ["-c", "alpha", "--beta"]
    assert prov["host"] == platform.node()
    assert prov["scheduler_job_ids"] == {"SLURM_JOB_ID": "4242", "PBS_JOBID": "17.server"}
    assert (prov["x64"], prov["jax_platforms"], prov["backend"]) == (True, "cpu", "cpu")


def test_resumed_run_continues_its_wandb_run_whose_config_holds_the_provenance(
    tmp_path, fake_env, capsys
):
    import wandb

    real_init, started = wandb.init, []

    def init(**kwargs):
        run = real_init(**kwargs)
        started.append((kwargs, run.id, json.loads(json.dumps(dict(run.config)))))
        return run

    fake_env.setattr(wandb, "init", init)
    path = tmp_path / "c.yaml"
    path.write_text("experiment: fake_pass\nseed: 5\nsize: quick\n")
    assert (
        cli.main(
            [
                "run",
                "--no-progress",
                str(path),
                f"output_dir={tmp_path / 'runs'}",
                "tracking.mode=offline",
            ]
        )
        == 0
    ), capsys.readouterr().err
    (run_dir,) = (tmp_path / "runs").glob("fake_pass-*")
    first = json.loads((run_dir / "results.json").read_text())
    (run_dir / "results.json").unlink()  # as if it had died before the end
    assert cli.main(["run", "--no-progress", "--resume", str(run_dir)]) == 0, (
        capsys.readouterr().err
    )
    again = json.loads((run_dir / "results.json").read_text())
    assert again["provenance"]["resumed"] is True

    (kw1, id1, config1), (kw2, id2, config2) = started
    assert "id" not in kw1 and (kw2["id"], kw2["resume"]) == (id1, "allow")
    assert (
        id2
        == id1
        == first["provenance"]["tracking"]["wandb_run_id"]
        == again["provenance"]["tracking"]["wandb_run_id"]
    )
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    # both attempts' folders are this W&B run's (W&B adds "-1" to a name taken in the same second)
    assert len(offline) == 2 and [len(g) for g in by_run_id(offline)] == [2]
    assert all(run_id(p) == id1 for p in offline)
    # W&B's config: the run's config and the provenance results.json records, key for key
    for config, results in ((config1, first), (config2, again)):
        prov = config["provenance"]
        assert prov == {k: results["provenance"][k] for k in prov}
        assert {
            "git_commit",
            "git_dirty",
            "install",
            "argv",
            "host",
            "jax_version",
            "backend",
            "x64",
            "packages",
        } <= set(prov)
        assert (prov["backend"], prov["jax_version"]) == (jax.default_backend(), jax.__version__)
        assert config["experiment"] == "fake_pass" and config["seed"] == 5
        assert validation_errors(results, "results") == []

    # a run directory from someone else: an id file that is a link is neither read nor written
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs\n")
    kept = run_dir / "wandb" / "dedebate-run-id"
    assert kept.read_text() == f"{id1}\n"
    kept.unlink()
    kept.symlink_to(outside)
    (run_dir / "results.json").unlink()
    assert cli.main(["run", "--no-progress", "--resume", str(run_dir)]) == 0
    (kw3, id3, _) = started[2]
    assert "id" not in kw3 and id3 not in (id1, "theirs")
    assert outside.read_text() == "theirs\n" and kept.read_text() == f"{id3}\n"
    assert not kept.is_symlink()


def test_resumed_reproduce_continues_its_wandb_run(tmp_path, fake_env, capsys):
    import wandb

    real_init, started = wandb.init, []

    def init(**kwargs):
        run = real_init(**kwargs)
        started.append((kwargs.get("job_type"), kwargs.get("id"), run.id))
        return run

    fake_env.setattr(wandb, "init", init)
    args = [
        "reproduce",
        "--quick",
        "--tracking",
        "offline",
        "--no-progress",
        "--only",
        "fake_pass",
        "--output-dir",
        str(tmp_path),
    ]
    assert cli.main(args) == 0, capsys.readouterr().err
    (rep,) = tmp_path.glob("reproduce-*")
    assert cli.main([*args[:-2], "--resume", str(rep)]) == 0, capsys.readouterr().err
    jobs = [(given, got) for job, given, got in started if job == "reproduce"]
    (given1, id1), (given2, id2) = jobs
    assert given1 is None and given2 == id2 == id1
