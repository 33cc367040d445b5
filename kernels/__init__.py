"""Fused credit-assignment estimators for reinforcement learning.

Each estimator is the linear recurrence ``A_t = alpha_t + beta_t A_{t+1}`` (or its forward twin),
solved as a parallel associative scan with ``(alpha, beta)`` built on chip from the raw rollout.
Tensors are time-major ``[T, N]`` by default (``time_dim=1``: ``[N, T]``; 1-D: one environment).
CUDA tensors run Triton kernels; CPU tensors run the float64 reference (or, under
``TRITON_INTERPRET=1``, the same Triton kernels in Triton's interpreter). The math of each
estimator is in its module's docstring and in ``docs/estimators.md``. ``capture`` records one call
in a CUDA graph for a training loop to replay on the same buffers (``kernels.captured``).
"""

from kernels._launch import LaunchConfig
from kernels.backends import BACKENDS, get_backend, trainer_backend
from kernels.captured import CapturedCall, capture
from kernels.discounted_returns import discounted_returns
from kernels.eligibility_traces import eligibility_traces
from kernels.episodic_prefix_sum import episodic_prefix_sum
from kernels.gae import gae
from kernels.lambda_returns import lambda_returns
from kernels.linear_scan import linear_scan
from kernels.retrace import retrace
from kernels.vtrace import vtrace

ESTIMATORS = (
    "gae",
    "vtrace",
    "retrace",
    "lambda_returns",
    "discounted_returns",
    "eligibility_traces",
    "episodic_prefix_sum",
    "linear_scan",
)

__all__ = [*ESTIMATORS, "LaunchConfig", "BACKENDS", "get_backend", "trainer_backend", "capture", "CapturedCall"]
