"""The lab shell: the only impure part of dedebate.

* ``experiment`` -- the contract for experiment modules (Claim, ExperimentResult, RunContext);
* ``config`` -- YAML + overrides -> a validated, frozen RunConfig (ConfigError on bad input);
* ``registry`` -- discovery of experiments and benchmarks;
* ``runner`` -- one run: run directory, context, results.json, metrics.jsonl, plots, tables;
* ``tracking`` -- W&B (offline by default) that never loses local results;
* ``report`` -- ``dedebate reproduce``: every experiment, report.md and report.json;
* ``sweep`` -- ``dedebate sweep``: grids of runs, vmapped over dynamic axes, sweep.csv, plots;
* ``devices`` -- the flat run axis sharded over ``jax.devices()`` (Mesh + NamedSharding);
* ``distributed`` -- ``jax.distributed`` start-up: local launcher, launcher env, SLURM;
* ``checkpoint`` -- Orbax checkpoints with fallback and a config-hash guard;
* ``driver`` -- the chunked training driver (checkpoint, restore and skip, monitors, logging);
* ``rundir`` -- run directories, provenance and JSON helpers.

Submodules are imported where they are used, so ``import dedebate.lab`` stays light.
"""
