"""The ``(alpha, beta)`` pairs of every estimator, built with vectorized PyTorch ops.

This is the one place where the baselines ("loop", "compile") turn raw rollout tensors into the
linear recurrence ``y_t = alpha_t + beta_t * y_prev`` that every estimator is (``y_prev`` is
``y_{t+1}`` for a reverse recurrence, ``y_{t-1}`` for a forward one). The math is that of the
docstrings of ``kernels/estimators/<op>.py``; :mod:`kernels.reference` is the specification.

A builder takes the ``[T, N]`` time-major views of a validated :class:`kernels._args.Batch`
(:func:`views`), the checked options (scalars; GAE's and V-trace's output switches) and the compute dtype (float32 for float16/bfloat16/float32
inputs, float64 when a float input is float64), and returns :class:`Pairs`: ``alpha``, ``beta``
(``[T, N]``, compute dtype), ``reverse``, the initial carry (``[N]`` or ``None`` for zeros) and
``post``, which maps the solved ``y`` to the outputs the call keeps (time-major, compute dtype):
GAE ``ret = A + V``, V-trace ``pg_adv`` from the exclusive value ``x_{t+1}``, Retrace
``q_ret = Q + D``.

:func:`make_estimators` wraps a backend's ``run(op, batch, scalars)`` in the public signatures,
validated by each fused op's own ``validate``.
Builders are pure tensor code, so they can be traced by ``torch.compile``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from kernels._args import Batch, selected

Tensor = torch.Tensor


@dataclass
class Pairs:
    alpha: Tensor
    beta: Tensor
    reverse: bool
    initial: Optional[Tensor] = None
    post: Optional[Callable[[Tensor], tuple]] = None

    def outputs(self, y: Tensor) -> tuple:
        """The estimator's outputs (time-major, compute dtype) from the solved recurrence ``y``."""
        return (y,) if self.post is None else self.post(y)


# --------------------------------------------------------------------------- #
# small building blocks (all [T, N] time-major)
# --------------------------------------------------------------------------- #
def _f(x: Optional[Tensor], cdt: torch.dtype) -> Optional[Tensor]:
    return None if x is None else x.to(cdt)


def _flag(x: Tensor) -> Tensor:
    """0/1 flags of any dtype as bool."""
    return x if x.dtype == torch.bool else x != 0


def _done(tm) -> tuple[Tensor, Tensor]:
    term = _flag(tm["terminated"])
    trunc = tm.get("truncated")
    return term, (term if trunc is None else term | _flag(trunc))


def _shift_up(x: Tensor, fill) -> Tensor:
    """``x[t + 1]`` for t < T-1 and ``fill`` (a ``[N]`` tensor or a number) at t = T-1."""
    last = fill[None] if isinstance(fill, Tensor) else torch.full_like(x[:1], fill)
    return torch.cat([x[1:], last.to(x.dtype)], dim=0)


def _keep(done: Tensor, value, cdt) -> Tensor:
    """``value`` where not ``done``, else 0, in ``cdt`` (a Python float is applied in ``cdt``, not
    rounded through float32)."""
    if isinstance(value, Tensor):
        return torch.where(done, 0.0, value)
    return (~done).to(cdt) * value


def _shift_down(x: Tensor, fill) -> Tensor:
    """``x[t - 1]`` for t > 0 and ``fill`` at t = 0."""
    return torch.cat([torch.full_like(x[:1], fill), x[:-1]], dim=0)


def _value_after(tm, v: Tensor, cdt) -> Tensor:
    """``V'_t``: ``next_values[t]`` when given, else ``V_{t+1}`` and ``bootstrap_value`` at T-1."""
    if tm.get("next_values") is not None:
        return tm["next_values"].to(cdt)
    return _shift_up(v, tm["bootstrap_value"].to(cdt))


# --------------------------------------------------------------------------- #
# builders
# --------------------------------------------------------------------------- #
def _kept(*outputs) -> tuple:
    """The outputs that were asked for (``None``: skipped), in order."""
    return tuple(o for o in outputs if o is not None)


def gae(tm, cdt, *, gamma: float, lam: float, advantages: bool = True, returns: bool = True) -> Pairs:
    r, v = _f(tm["rewards"], cdt), _f(tm["values"], cdt)
    term, done = _done(tm)
    v_after = _value_after(tm, v, cdt)
    alpha = r + gamma * torch.where(term, 0.0, v_after) - v
    beta = _keep(done, gamma * lam, cdt)
    return Pairs(alpha, beta, reverse=True,
                 post=lambda adv: _kept(adv if advantages else None, adv + v if returns else None))


def vtrace(tm, cdt, *, gamma: float, lam: float, rho_bar: float, c_bar: float, pg_rho_bar: float,
           value_targets: bool = True, pg_advantages: bool = True) -> Pairs:
    r, v = _f(tm["rewards"], cdt), _f(tm["values"], cdt)
    rho = torch.exp(_f(tm["log_rhos"], cdt))
    term, done = _done(tm)
    v_after = _value_after(tm, v, cdt)
    alpha = torch.clamp(rho, max=rho_bar) * (r + gamma * torch.where(term, 0.0, v_after) - v)
    beta = _keep(done, gamma * lam * torch.clamp(rho, max=c_bar), cdt)

    def post(x: Tensor) -> tuple:
        if not pg_advantages:
            return (v + x,)
        # q_t = lam vs_{t+1} + (1 - lam) V_{t+1} = V_{t+1} + lam x_{t+1} (t < T-1, not done), else V'_t
        use_mixed = torch.cat([~done[:-1], torch.zeros_like(done[:1])])
        mixed = _shift_up(v, 0.0) + lam * _shift_up(x, 0.0)
        q = torch.where(use_mixed, mixed, v_after)
        pg_adv = torch.clamp(rho, max=pg_rho_bar) * (r + gamma * torch.where(term, 0.0, q) - v)
        return _kept(v + x if value_targets else None, pg_adv)

    return Pairs(alpha, beta, reverse=True, post=post)


def retrace(tm, cdt, *, gamma: float, lam: float, c_bar: float) -> Pairs:
    r, q, eq = _f(tm["rewards"], cdt), _f(tm["q_taken"], cdt), _f(tm["expected_next_q"], cdt)
    c = lam * torch.clamp(torch.exp(_f(tm["log_rhos"], cdt)), max=c_bar)
    term, done = _done(tm)
    alpha = r + gamma * torch.where(term, 0.0, eq) - q
    beta = _keep(done, gamma * _shift_up(c, 0.0), cdt)  # c_{t+1}; 0 at t = T-1
    return Pairs(alpha, beta, reverse=True, post=lambda d: (q + d,))


def lambda_returns(tm, cdt, *, gamma: float, lam: float) -> Pairs:
    r, nv = _f(tm["rewards"], cdt), _f(tm["next_values"], cdt)
    term, done = _done(tm)
    trace = _keep(done, gamma * lam, cdt)
    alpha = r + gamma * torch.where(term, 0.0, nv) - trace * nv
    return Pairs(alpha, trace, reverse=True, initial=nv[-1])  # G_T = V'_{T-1}


def discounted_returns(tm, cdt, *, gamma: float) -> Pairs:
    r = _f(tm["rewards"], cdt)
    term, done = _done(tm)
    nv = _f(tm.get("next_values"), cdt)
    alpha = r
    if tm.get("truncated") is not None:
        boot_here = _flag(tm["truncated"]) & ~term
        alpha = r + torch.where(boot_here, gamma * nv, 0.0)
    beta = _keep(done, gamma, cdt)
    if tm.get("bootstrap_value") is not None:
        initial = tm["bootstrap_value"].to(cdt)
    elif nv is not None:
        initial = nv[-1]
    else:
        initial = None
    return Pairs(alpha, beta, reverse=True, initial=initial)


def eligibility_traces(tm, cdt, *, gamma: float, lam: float) -> Pairs:
    x = _f(tm["inputs"], cdt)
    done_before = _shift_down(_flag(tm["dones"]), False)
    beta = _keep(done_before, gamma * lam, cdt)
    return Pairs(x, beta, reverse=False, initial=_f(tm.get("initial"), cdt))


def episodic_prefix_sum(tm, cdt, *, boundary: str) -> Pairs:
    x = _f(tm["inputs"], cdt)
    flags = _flag(tm["dones"])
    new_episode = flags if boundary == "starts_at" else _shift_down(flags, False)
    beta = _keep(new_episode, 1.0, cdt)
    return Pairs(x, beta, reverse=False, initial=_f(tm.get("initial"), cdt))


def linear_scan(tm, cdt, *, reverse: bool) -> Pairs:
    return Pairs(_f(tm["alpha"], cdt), _f(tm["beta"], cdt), reverse=reverse, initial=_f(tm.get("initial"), cdt))


BUILDERS = {
    "gae": gae,
    "vtrace": vtrace,
    "retrace": retrace,
    "lambda_returns": lambda_returns,
    "discounted_returns": discounted_returns,
    "eligibility_traces": eligibility_traces,
    "episodic_prefix_sum": episodic_prefix_sum,
    "linear_scan": linear_scan,
}


def build(op: str, tm, cdt, scalars) -> Pairs:
    return BUILDERS[op](tm, cdt, **scalars)


# --------------------------------------------------------------------------- #
# output layout
# --------------------------------------------------------------------------- #
def to_caller(y: Tensor, out_dtype: torch.dtype, time_dim: int, one_env: bool) -> Tensor:
    """A ``[T, N]`` result in the caller's layout and dtype (``Batch.from_time_major`` as a pure
    function of static arguments, so ``torch.compile`` can fuse it)."""
    y = y.to(out_dtype)
    if one_env:
        return y.reshape(y.shape[0])
    return y if time_dim == 0 else y.t().contiguous()


def empty_outputs(op: str, b: Batch, options: dict):
    """The outputs of a T = 0 call (no recurrence to solve): one per output the call keeps (an
    estimator's ``OUTPUTS`` switches in ``options``; one output where it has none)."""
    from kernels.estimators import MODULES

    switches = getattr(MODULES[op], "OUTPUTS", ())
    return selected(*(b.output(options[name]) for name in switches)) if switches else b.output()


PER_ENV = ("bootstrap_value", "initial")


def views(b: Batch) -> dict:
    """Every argument of a validated call by name: ``[T, N]`` views of the series, ``[N]`` views of
    the per-environment tensors, ``None`` where an optional one was not given."""
    return {name: b.env_vector(name) if name in PER_ENV else b.time_major(name) for name in b.given}


# --------------------------------------------------------------------------- #
# the public signatures, written once
# --------------------------------------------------------------------------- #
Runner = Callable[[str, Batch, dict, object], object]


def make_estimators(run: Runner) -> dict:
    """The eight estimators with the public signatures, solved by ``run(op, batch, scalars, config)``.

    Each one validates its arguments with the fused op's own ``validate`` (one place for the
    checks), so a baseline accepts and rejects exactly what the public function does; ``config``
    is accepted for signature parity.
    """
    import kernels
    from kernels.estimators import MODULES

    def estimator(op: str):
        public = getattr(kernels, op)
        validate = MODULES[op].validate

        @functools.wraps(public)
        def solve(*args, config=None, **kwargs):
            batch, scalars = validate(*args, **kwargs)
            return run(op, batch, scalars, config)

        return solve

    return {op: estimator(op) for op in kernels.ESTIMATORS}
