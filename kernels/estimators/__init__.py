"""The fused estimators, one module each: the math in its docstring, its ``(alpha, beta)`` as a small
``@triton.jit`` function, its kernel (tiles in, pairs to ``kernels.scan``, results out), its
argument checks (``validate``, through ``kernels._args.Batch``) and its public wrapper. ``FAMILY``
names the tuned-table family of its launches (``kernels.launch.tuned``). Adding an estimator is
adding a module here and its name to ``MODULES``."""

from kernels.estimators import (discounted_returns, eligibility_traces, episodic_prefix_sum, gae, lambda_returns,
                                linear_scan, retrace, vtrace)

MODULES = {"gae": gae, "vtrace": vtrace, "retrace": retrace, "lambda_returns": lambda_returns,
           "discounted_returns": discounted_returns, "eligibility_traces": eligibility_traces,
           "episodic_prefix_sum": episodic_prefix_sum, "linear_scan": linear_scan}
ESTIMATORS = tuple(MODULES)
