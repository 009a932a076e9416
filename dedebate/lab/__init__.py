"""The lab shell: the only impure part of dedebate (docs/lab.md).

* ``experiment`` -- the contract for experiment modules; ``claims`` -- report rows and decisions;
* ``config`` -- YAML + overrides -> a validated RunConfig (``config_schema``, ``config_types``,
  ``config_yaml``, ``config_docs``: the classes, value checks, safe loader, rendered docs);
* ``registry`` -- discovery of experiments and benchmarks;
* ``runner`` -- one run; ``context`` -- the services a run gives its experiment;
* ``tracking`` -- W&B (offline by default) that never loses local results;
* ``report`` -- ``dedebate reproduce`` (``report_render``: the report); ``sweep`` -- sweeps;
* ``devices`` / ``distributed`` -- the run axis sharded over devices; multi-process start-up;
* ``checkpoint`` / ``driver`` -- Orbax checkpoints; the chunked training driver;
* ``rundir`` / ``provenance`` -- run directories and their writers; what a result records.

Submodules are imported where they are used, so ``import dedebate.lab`` stays light.
"""
