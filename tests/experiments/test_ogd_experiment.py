"""The ogd_estimator config file and its validation.

(The quick run, through the CLI with its tables, checkpoints, W&B files and ``resume=true``, is in
``tests/experiments/test_ogd_resume.py``.)"""

from __future__ import annotations

import pytest

import experiments.ogd_estimator as exp
from dedebate.lab.config import load_config
from tests.conftest import REPO


def test_config_file_loads_and_bad_values_are_rejected():
    cfg = load_config(REPO / "configs" / "ogd_estimator.yaml", {exp.NAME: exp})
    assert cfg.experiment == exp.NAME
    with pytest.raises(ValueError, match="deltas="):
        exp.Config(deltas=(0.1, 0.0))
    with pytest.raises(ValueError, match="step_rules="):
        exp.Config(step_rules=("adam",))
    with pytest.raises(ValueError, match="sound_provers="):
        exp.Config(sound_provers=("nobody",))
    with pytest.raises(ValueError, match="q_values="):
        exp.Config(q_values=(6,))
    with pytest.raises(ValueError, match="net_checkpoint_every=0"):
        exp.Config(net_checkpoint_every=0)


def test_every_size_holds_the_simplest_liar_in_the_soundness_zoo():
    """The liar that lies at the root then plays honestly is the stronger attacker at the
    default size (U_A 0.09 against the obfuscating liar's 0.03): no size may drop it."""
    for size in ("quick", None, "full"):
        provers = exp.Config(**exp.SIZES.get(size, {})).sound_provers
        assert "lie_then_honest" in provers and "obfuscating" in provers
