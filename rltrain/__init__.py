"""rltrain: small reusable pieces shared by the PPO and IMPALA trainers.

One job per module:

* :mod:`rltrain.config`     -- ``--config`` YAML presets + tyro CLI, ``ConfigError``.
* :mod:`rltrain.runtime`    -- device / thread selection, run-folder naming.
* :mod:`rltrain.machine`    -- which machine, which versions, when: every results file's ``meta``.
* :mod:`rltrain.seeding`    -- seeding and RNG state capture/restore.
* :mod:`rltrain.timers`     -- per-phase timers (CUDA events / host clocks), Amdahl.
* :mod:`rltrain.logger`     -- console progress bar, JSONL, TensorBoard, wandb.
* :mod:`rltrain.checkpoint` -- atomic checkpoint save / load.
* :mod:`rltrain.rollout`    -- preallocated time-major rollout storage, pinned H2D staging.
* :mod:`rltrain.cuda_graph` -- a function of fixed tensors recorded once as a CUDA graph, replayed.
* :mod:`rltrain.policy_step` -- the rollout's batched policy step on static buffers (graph-replayed).
* :mod:`rltrain.collector`  -- PPO's on-policy rollouts: env groups in turn, captured inference.
* :mod:`rltrain.overlap`    -- PPO's rollouts between updates, or in a thread beside the update
  (``--overlap-rollout``: the behaviour policy one update stale).
* :mod:`rltrain.losses`     -- masked mean over valid rows, the non-finite-loss stop.
* :mod:`rltrain.trainer`    -- flags with ``--resume`` defaults, run folder + logger + resume, exit codes.
* :mod:`rltrain.validation` -- every trainer flag's rule, declared once; ``validate(args)``.
* :mod:`rltrain.minibatches` -- ``--num-minibatches`` / ``--minibatch-size``, one derived from the other.
* :mod:`rltrain.wallclock`  -- training seconds across ``--resume`` (``charts/wall_s``).
* :mod:`rltrain.evaluation` -- full episodes with a policy: game scores, video, ``--eval-every``.
* :mod:`rltrain.time_to_score` -- when a run's average return first reaches a threshold; curves.
* :mod:`rltrain.trainer_process` -- a trainer script as a child process, stopped at a budget of training seconds;
  ``load_trainer``, the one loader of the trainer programs (scripts/ppo.py, scripts/impala.py) for the tools
  that run one or read its flags.
* :mod:`rltrain.atari_scores` -- the 57 Atari games' reference scores: human-normalised scores, the
  Atari-5 estimate, CleanRL's 10M-step PPO scores (``rltrain/data/atari_scores.json``).
* :mod:`rltrain.atari_suite` -- the Atari suite's state file, results document, table and plot.
* :mod:`rltrain.distributed` -- torchrun launch, DDP, global statistics, rank-0 output, per-rank
  checkpoint state, failures.
* :mod:`rltrain.torchrun_jobs` -- a torchrun job seen from outside: kill one rank, read the failure summary.
* :mod:`rltrain.credit`     -- the trainers' credit-assignment calls: backends by name, taking
  turns, checked against the reference, timed, shadowed by a baseline (live Amdahl).
* :mod:`rltrain.study`      -- the speedup study's arithmetic and tables; :mod:`rltrain.study_plots`
  its figures.
* :mod:`rltrain.bench`      -- the benchmarks' shared code (scripts/bench_*.py, compare_rl_triton.py,
  results_tables.py are its command lines): inputs and checks, timing, the kernels grid, rl-triton's
  adapters, the trainer and scaling benchmarks, the results tables.
"""
