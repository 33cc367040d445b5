"""Fused credit-assignment estimators for reinforcement learning.

Each estimator is the linear recurrence ``A_t = alpha_t + beta_t A_{t+1}`` (or its forward twin),
solved as a parallel associative scan with ``(alpha, beta)`` built on chip from the raw rollout.
Tensors are time-major ``[T, N]`` by default (``time_dim=1``: ``[N, T]``; 1-D: one environment).
CUDA tensors run Triton kernels; CPU tensors run the float64 reference (or, under
``TRITON_INTERPRET=1``, the same Triton kernels in Triton's interpreter).

Layout: ``kernels.scan`` is the scan engine (tiles, the walk over time, the chunked carry),
``kernels.estimators.<name>`` one estimator each (its math, its ``(alpha, beta)``, its wrapper),
``kernels.launch`` the launch choices (``LaunchConfig``, the heuristic, the tuned tables per device),
``kernels.fast_path`` the host's fast path (replay of validated calls, ``capture`` in a CUDA graph).
The math of each estimator is in its module's docstring and in ``docs/estimators.md``.
"""

from kernels.backends import BACKENDS, get_backend, trainer_backend
from kernels.estimators import ESTIMATORS
from kernels.estimators.discounted_returns import discounted_returns
from kernels.estimators.eligibility_traces import eligibility_traces
from kernels.estimators.episodic_prefix_sum import episodic_prefix_sum
from kernels.estimators.gae import gae
from kernels.estimators.lambda_returns import lambda_returns
from kernels.estimators.linear_scan import linear_scan
from kernels.estimators.retrace import retrace
from kernels.estimators.vtrace import vtrace
from kernels.fast_path import CapturedCall, capture
from kernels.launch import LaunchConfig

__all__ = [*ESTIMATORS, "ESTIMATORS", "LaunchConfig", "BACKENDS", "get_backend", "trainer_backend", "capture",
           "CapturedCall"]
