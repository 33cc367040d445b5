"""rltrain: small reusable pieces shared by the PPO and IMPALA trainers.

One job per module:

* :mod:`rltrain.config`     -- ``--config`` YAML presets + tyro CLI, input validation.
* :mod:`rltrain.runtime`    -- device / thread selection, run-folder naming.
* :mod:`rltrain.seeding`    -- seeding and RNG state capture/restore.
* :mod:`rltrain.timers`     -- per-phase timers (CUDA events / host clocks), Amdahl.
* :mod:`rltrain.logger`     -- console progress bar, JSONL, TensorBoard, wandb.
* :mod:`rltrain.checkpoint` -- atomic checkpoint save / load.
* :mod:`rltrain.rollout`    -- preallocated time-major rollout storage, pinned H2D staging.
"""
