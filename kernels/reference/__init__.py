"""Float64 sequential reference implementations of the credit-assignment estimators.

This module is the *specification* of every estimator exposed by :mod:`kernels`
and also the CPU fallback path used when the Triton kernels are not run.

Every function here is written straight from the published math, as a literal
loop over time steps (vectorised over the batch dimension ``N``), in float64.
None of them goes through a generic ``y_t = alpha_t + beta_t y_{t+1}`` scan:
the point of this module is to be an independent statement of the math
against which the fused kernels (which *are* such scans) are checked.

Conventions (shared by all functions)
-------------------------------------
* Tensors are time-major ``[T, N]`` (a 1-D ``[T]`` tensor is accepted as a
  single environment and the outputs are then 1-D as well).  ``bootstrap_value``
  and ``initial`` are ``[N]`` (or scalars / 0-d for 1-D inputs).
* Float inputs may have any floating dtype; they are upcast to float64.  Flag
  tensors (``terminated``, ``truncated``, ``dones``) may have any dtype and are
  interpreted as ``x != 0``.
* Outputs are float64 tensors on the device of the first input.  ``T == 0``
  returns empty ``[0, N]`` outputs.
* No argument validation is done here (the public wrappers in
  :mod:`kernels` validate); optional arguments may be ``None``.

Terminated vs truncated (t = 0..T-1)
------------------------------------
``r_t`` is the reward after action ``a_t``.  ``terminated_t``: the episode
ended at step t in a terminal state (no bootstrap).  ``truncated_t``: it was
cut at step t (time limit): bootstrap from the value of the state after step
t.  ``done_t = terminated_t or truncated_t``; terminated wins if both are set.
``V_t = values[t]``; ``bootstrap_value = V(s_T)``.  The value of the state
after step t is ``V'_t = next_values[t]`` when given, else ``V_{t+1}`` for
``t < T-1`` and ``bootstrap_value`` for ``t = T-1``.
"""

from kernels.reference.advantages import gae, retrace, vtrace
from kernels.reference.returns import (discounted_returns, eligibility_traces, episodic_prefix_sum, lambda_returns,
                                       linear_scan)

__all__ = ["gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
           "episodic_prefix_sum", "linear_scan"]
