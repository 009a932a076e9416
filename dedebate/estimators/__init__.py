"""Outcome indistinguishability (spec PED 5-6): B's estimators and the tests they must fool.

* :mod:`~dedebate.estimators.families` -- test families F ("prover circuits"): random tanh tests,
  Flax MLP distinguishers, the spec 6.3 round-reward and calibration tests, unions;
* :mod:`~dedebate.estimators.advantage` -- exact ``Adv_f(h)`` over a finite context set;
* :mod:`~dedebate.estimators.ogd` -- Algorithm 1 (tabular OGD) with its iteration bound;
* :mod:`~dedebate.estimators.network`, :mod:`~dedebate.estimators.train` -- a Flax estimator
  trained by OGD toward (delta, F)-indistinguishability;
* :mod:`~dedebate.estimators.soundness` -- B built round by round against a fixed A (Lemma A.4).
"""
