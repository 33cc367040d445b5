"""Baseline implementations of the estimators, for ``kernels.get_backend`` and the benchmark.

- :mod:`kernels.baselines.pairs`: the ``(alpha, beta)`` pairs of every estimator in vectorized
  PyTorch, and the public signatures written once around a backend's solver;
- :mod:`kernels.baselines.loop`: an eager PyTorch loop over T, vector ops over N (CleanRL style);
- :mod:`kernels.baselines.compiled`: a log-step (Hillis-Steele) scan under ``torch.compile``;
- :mod:`kernels.baselines.sequential`: the fused kernels with ``block_t=1``, one lane per
  environment looping over T (the design of PufferLib's CUDA kernel).

All compute the public semantics (same signatures, validation, layouts and output dtypes);
:mod:`kernels.reference` decides. Modules are imported lazily by ``get_backend``.
"""
