"""The benchmarks' shared code; the scripts in ``scripts/`` are their command lines.

* :mod:`rltrain.bench.cells`        -- a kernel benchmark cell: random inputs, bytes, the check against the
  float64 reference before timing (``checked_times``).
* :mod:`rltrain.bench.timing`       -- ``do_bench``, host calls, captured calls, CUDA-graph replays, CUDA
  events, a copy's bandwidth, input sets that keep a cell out of the L2.
* :mod:`rltrain.bench.kernel_grid`  -- the kernels grid of ``bench_kernels.py``: cells, rows, results files.
* :mod:`rltrain.bench.plots`        -- its speedup plots (``plot_bench.py``).
* :mod:`rltrain.bench.rl_triton`    -- the comparison with rl-triton (``compare_rl_triton.py``): adapters, run.
* :mod:`rltrain.bench.envpool`      -- raw EnvPool throughput (``bench_envpool.py``).
* :mod:`rltrain.bench.trainer_cases`, :mod:`~rltrain.bench.trainer_runs`, :mod:`~rltrain.bench.trainer_tables`,
  :mod:`~rltrain.bench.update_microbench` -- the trainer benchmark (``bench_trainer.py``).
* :mod:`rltrain.bench.scaling`, :mod:`~rltrain.bench.scaling_tables` -- multi-GPU scaling (``bench_scaling.py``).
* :mod:`rltrain.bench.formats`      -- a time in microseconds, the machine line under a table.
* :mod:`rltrain.bench.tables`       -- every results table and the generated tables of the docs
  (``results_tables.py``).
"""
