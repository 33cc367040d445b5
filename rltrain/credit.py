"""Credit assignment as the trainers call it: backends by name, taking turns, checked, measured live.

A trainer builds one :class:`CreditAssignment` from its flags and calls ``credit.gae(...)``,
``credit.vtrace(...)`` or ``credit.retrace(...)`` with the public signatures of :mod:`kernels`.

**Backends** (``--ca-backend``), all computing the same semantics:

* ``triton``: the fused kernels (the public API of :mod:`kernels`);
* ``captured``: the fused kernel recorded in a CUDA graph once per call signature
  (:func:`kernels.capture`) and replayed at every call.  Tensors the trainer declared fixed with
  :meth:`CreditAssignment.pin` (its rollout storage) are captured where they are; any other input is
  first copied into a buffer of the capture, so each replay reads this call's data.  The outputs are
  the same tensors at every call, overwritten by the next one.  Without CUDA it runs eagerly;
* ``loop``, ``compile``, ``sequential``: the benchmark's baselines (:mod:`kernels.backends`);
* ``auto``: ``triton``, or ``loop`` on the CPU under ``TRITON_INTERPRET=1`` (:func:`kernels.trainer_backend`).

**Taking turns**: several backends, comma-separated (``loop,compile,triton``), rotate by
iteration: iteration ``i`` (counted from 1) runs backend ``(i - 1) mod B`` for all of its calls, so
each backend learns from the same training run on the same machine state (the speedup study's
interleaved mode, ``scripts/speedup_study.py``).

**Checked**: the first call of each estimator runs every backend of the rotation on the same batch
and compares it with the float64 reference (:mod:`kernels.reference`); a relative error
``||out - ref|| / ||ref||`` above ``EQUIVALENCE_TOL`` raises :class:`CreditMismatchError` before the
update uses it.  The errors are logged once, as ``check/ca_rel_err_<backend>``.

**Timed**: each call is timed as the trainer's phase ``phase`` on its :class:`~rltrain.timers.PhaseTimer`.

**Measured live** (the shadow): at every ``shadow_every``-th iteration each call also runs the
``shadow`` backend (a baseline such as ``loop``) on the same inputs, after the phase, between two
device synchronisations; its result is compared with the one in use (``perf/ca_shadow_rel_err``,
raising above the tolerance) and never learned from.  With ``t_kernel`` the iteration's
credit-assignment phase, ``t_base`` the shadow's seconds for the same calls and ``T_iter`` the
iteration's wall time less the shadow's:

* kernel speedup ``k = t_base / t_kernel`` (``perf/ca_kernel_speedup``);
* share ``s = t_base / (T_iter - t_kernel + t_base)`` (``perf/ca_share``): the baseline's share of
  its own iteration, the one it would have taken in place of the backend in use;
* Amdahl's prediction ``1 / ((1 - s) + s / k)`` (``perf/amdahl_predicted_speedup``) of the backend in
  use over the baseline, end to end; with these definitions it equals ``(T_iter - t_kernel + t_base) / T_iter``.
"""

from __future__ import annotations

import math
import time
from typing import Dict, List, Optional, Sequence

import torch

import kernels
from kernels import reference
from kernels._triton import INTERPRET, runs_triton
from rltrain.config import ConfigError, close_matches
from rltrain.timers import PhaseTimer, amdahl_speedup

__all__ = ["BACKEND_NAMES", "EQUIVALENCE_TOL", "RECOMPUTE_MODES", "CreditAssignment", "CreditMismatchError",
           "baseline_share", "kernel_speedup", "parse_backends", "rel_err", "targets_due"]

BACKEND_NAMES = ("auto", "triton", "captured", "compile", "loop", "sequential")
EQUIVALENCE_TOL = 1e-4
RECOMPUTE_MODES = ("once", "epoch", "minibatch")


class CreditMismatchError(RuntimeError):
    """Two credit-assignment backends (or one and the float64 reference) disagree on the same batch."""


def parse_backends(spec: str, flag: str = "--ca-backend") -> List[str]:
    """``"loop,compile,triton"`` -> ``["loop", "compile", "triton"]``; a :class:`ConfigError` naming
    ``flag`` for an empty list, an unknown name or a name given twice."""
    names = [n.strip() for n in str(spec).split(",")]
    if not all(names):
        raise ConfigError(f"{flag} {spec!r}: give one backend or several, comma-separated, e.g. loop,compile,triton")
    for n in names:
        if n not in BACKEND_NAMES:
            raise ConfigError(f"{flag}: unknown backend {n!r}; choose from {', '.join(BACKEND_NAMES)}."
                              f"{close_matches(n, BACKEND_NAMES)}")
    if len(set(names)) < len(names):
        raise ConfigError(f"{flag} {spec!r} names a backend twice")
    return names


def targets_due(mode: str, epoch: int, minibatch: int) -> bool:
    """Whether the update (re)computes its credit-assignment targets before minibatch ``minibatch``
    of epoch ``epoch`` (both counted from 0) under ``--advantage-recompute mode``: ``once`` before
    the first minibatch of the update, ``epoch`` before the first of every epoch, ``minibatch``
    before every one."""
    if mode not in RECOMPUTE_MODES:
        raise ValueError(f"advantage recompute mode must be one of {RECOMPUTE_MODES}, got {mode!r}")
    return mode == "minibatch" or (minibatch == 0 and (epoch == 0 or mode == "epoch"))


def kernel_speedup(t_base: float, t_kernel: float) -> float:
    """``k = t_base / t_kernel`` (infinite when the kernel's time reads 0)."""
    return t_base / t_kernel if t_kernel > 0 else math.inf


def baseline_share(t_base: float, t_kernel: float, t_iter: float) -> float:
    """The baseline's share of its own iteration, ``s = t_base / (t_iter - t_kernel + t_base)``, from an
    iteration of ``t_iter`` seconds whose credit assignment took ``t_kernel`` and would have taken
    ``t_base`` with the baseline (module docstring)."""
    return t_base / (t_iter - t_kernel + t_base)


def rel_err(out, ref) -> torch.Tensor:
    """``max_i ||out_i - ref_i|| / max_j ||ref_j||`` over the outputs (a tensor or a tuple), in float64,
    as a 0-d tensor on their device (no synchronisation); NaN where an output is not finite.

    Each output's error is measured against the largest output (GAE's returns, V-trace's ``vs``), not
    its own norm: an advantage is a small difference of value-sized numbers, so once the critic is good
    float32 rounding of the values alone is a large error relative to the advantages' own norm (1.7e-4
    for the float32 loop against the float64 reference on CartPole's solved episodes)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    scale = torch.stack([torch.linalg.vector_norm(r.detach().double()) for r in refs]).max()
    scale = scale.clamp_min(torch.finfo(torch.float64).tiny)
    errs = []
    for o, r in zip(outs, refs, strict=True):
        o, r = o.detach().double(), r.detach().double()
        errs.append(torch.where(torch.isfinite(o).all(), torch.linalg.vector_norm(o - r) / scale, torch.nan))
    return torch.stack(errs).max()


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
            and a.dtype == b.dtype and a.device == b.device)


class _Eager:
    """A backend of :mod:`kernels.backends`, called on the caller's tensors."""

    def __init__(self, name: str, device: torch.device):
        self._ns = kernels.trainer_backend(name, device)
        self.name, self.label = self._ns.name, self._ns.label

    def __call__(self, estimator: str, *args, **kwargs):
        return getattr(self._ns, estimator)(*args, **kwargs)


class _Captured:
    """The fused estimator captured once per call signature and replayed (module docstring)."""

    name = "captured"

    def __init__(self, device: torch.device, pinned: List[torch.Tensor]):
        self._fused = kernels.trainer_backend("triton", device)
        graphed = device.type == "cuda" and not INTERPRET
        self.label = "captured" if graphed else f"captured (no CUDA graph: {self._fused.label}, eager)"
        self._pinned = pinned  # the CreditAssignment's list: pins made after construction count
        self._calls: Dict[tuple, tuple] = {}

    def _pinned_tensor(self, x: torch.Tensor) -> bool:
        return any(_same_tensor(x, p) for p in self._pinned)

    def _key(self, x):
        if isinstance(x, torch.Tensor):
            return (tuple(x.shape), x.dtype, x.stride(), str(x.device),
                    x.data_ptr() if self._pinned_tensor(x) else None)
        return x

    def __call__(self, estimator: str, *args, **kwargs):
        names = sorted(kwargs)
        given = [*args, *(kwargs[k] for k in names)]
        key = (estimator, len(args), tuple(names), tuple(self._key(x) for x in given))
        if key not in self._calls:
            static = [x if not isinstance(x, torch.Tensor) or self._pinned_tensor(x) else x.clone() for x in given]
            call = kernels.capture(getattr(self._fused, estimator), *static[:len(args)],
                                   **dict(zip(names, static[len(args):])))
            self._calls[key] = (call, static)
        call, static = self._calls[key]
        for dst, src in zip(static, given):
            if isinstance(src, torch.Tensor) and not _same_tensor(dst, src):
                dst.copy_(src)
        return call()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class CreditAssignment:
    """The trainer's credit-assignment calls: backends taking turns, checked, timed and shadowed
    (module docstring).

    ``backends``: ``--ca-backend``, one name or several comma-separated; ``timer`` and ``phase``:
    where each call is timed; ``shadow`` and ``shadow_every``: ``--ca-shadow-backend`` and
    ``--ca-shadow-every`` (0: no shadow).  Bad names raise :class:`ConfigError`.
    Per iteration: :meth:`start_iteration`, the calls, then :meth:`end_iteration` for the metrics.
    """

    def __init__(self, backends: str, device: torch.device | str, timer: PhaseTimer, phase: str, *,
                 shadow: Optional[str] = "loop", shadow_every: int = 0):
        if shadow_every < 0:
            raise ConfigError(f"--ca-shadow-every must be >= 0 (0: no shadow), got {shadow_every}")
        self.device = torch.device(device)
        self.timer, self.phase, self.shadow_every = timer, phase, shadow_every
        self._pinned: List[torch.Tensor] = []
        self.backends = [self._make(n, "--ca-backend") for n in parse_backends(backends)]
        if len(set(self.names)) < len(self.names):
            raise ConfigError(f"--ca-backend {backends!r} runs a backend twice here (as {', '.join(self.names)}: "
                              f"auto is one of the others)")
        self.shadow = None
        if shadow_every:
            shadow_names = parse_backends(shadow or "", "--ca-shadow-backend")
            if len(shadow_names) != 1:
                raise ConfigError(f"--ca-shadow-backend takes one backend, got {shadow!r}")
            self.shadow = self._make(shadow_names[0], "--ca-shadow-backend")
        self.index = 0
        self._checked: set = set()
        self._check_errors: Dict[str, float] = {}
        self._check_reported = False
        self._shadow_now = False
        self._shadow_s = self._shadow_wall_s = 0.0
        self._shadow_errs: List[torch.Tensor] = []

    def _make(self, name: str, flag: str):
        if name == "sequential" and not runs_triton(self.device):
            raise ConfigError(f"{flag} sequential runs the Triton kernels: it needs CUDA (or TRITON_INTERPRET=1 "
                              f"on the CPU); this run is on {self.device.type}")
        return _Captured(self.device, self._pinned) if name == "captured" else _Eager(name, self.device)

    # ------------------------------------------------------------------ what runs
    @property
    def names(self) -> List[str]:
        """The backends' names in rotation order (``auto`` resolved)."""
        return [b.name for b in self.backends]

    @property
    def name(self) -> str:
        """The backend of the current iteration."""
        return self.backends[self.index].name

    @property
    def labels(self) -> Dict[str, str]:
        """What each backend runs on this device, by name (for the run's log)."""
        return {b.name: b.label for b in self.backends}

    @property
    def label(self) -> str:
        labels = ", ".join(self.labels.values())
        return labels if len(self.backends) == 1 else f"{labels} (taking turns by iteration)"

    def pin(self, *tensors: torch.Tensor) -> None:
        """Declare tensors that keep their storage for the whole run (the rollout buffers): the
        ``captured`` backend replays on them in place instead of copying them at every call."""
        self._pinned.extend(tensors)

    # ------------------------------------------------------------------ per iteration
    def start_iteration(self, iteration: int) -> None:
        """Pick iteration ``iteration``'s backend (counted from 1) and whether it is shadowed."""
        self.index = (iteration - 1) % len(self.backends)
        self._shadow_now = (self.shadow is not None and iteration % self.shadow_every == 0
                            and self.shadow.name != self.name)
        self._shadow_s = self._shadow_wall_s = 0.0
        self._shadow_errs = []

    def gae(self, *args, **kwargs):
        """:func:`kernels.gae` on the current backend."""
        return self._call("gae", args, kwargs)

    def vtrace(self, *args, **kwargs):
        """:func:`kernels.vtrace` on the current backend."""
        return self._call("vtrace", args, kwargs)

    def retrace(self, *args, **kwargs):
        """:func:`kernels.retrace` on the current backend."""
        return self._call("retrace", args, kwargs)

    def end_iteration(self, secs: Dict[str, float], wall: float) -> Dict[str, float]:
        """The iteration's metrics, from its phase seconds ``secs`` (read after the calls, so the device
        is synchronised) and wall seconds ``wall``: the backend's index in the rotation, the
        equivalence errors the first time, the shadow's measurement where there was one."""
        metrics: Dict[str, float] = {"perf/ca_backend_index": self.index}
        if self._check_errors and not self._check_reported:
            metrics.update({f"check/ca_rel_err_{n}": e for n, e in self._check_errors.items()})
            self._check_reported = True
        if self._shadow_now and self._shadow_errs:
            err = max(float(e) for e in self._shadow_errs)
            if not err <= EQUIVALENCE_TOL:
                raise CreditMismatchError(
                    f"credit assignment: {self.name} and the shadow {self.shadow.name} disagree on the same batch "
                    f"(relative error {err:.3g} > {EQUIVALENCE_TOL:g})")
            t_kernel, t_base = secs.get(self.phase, 0.0), self._shadow_s
            k = kernel_speedup(t_base, t_kernel)
            s = baseline_share(t_base, t_kernel, wall - self._shadow_wall_s)
            metrics.update({
                "perf/ca_shadow_s": t_base, "perf/ca_shadow_wall_s": self._shadow_wall_s,
                "perf/ca_shadow_rel_err": err, "perf/ca_kernel_speedup": k, "perf/ca_share": s,
                "perf/amdahl_predicted_speedup": amdahl_speedup(s, k),
            })
        return metrics

    # ------------------------------------------------------------------ internals
    def _call(self, estimator: str, args: Sequence, kwargs: dict):
        if estimator not in self._checked:
            self._check(estimator, args, kwargs)
        with self.timer.phase(self.phase):
            out = self.backends[self.index](estimator, *args, **kwargs)
        if self._shadow_now:
            self._measure_shadow(estimator, args, kwargs, out)
        return out

    def _check(self, estimator: str, args: Sequence, kwargs: dict) -> None:
        """Every backend of the rotation against the float64 reference, on this call's inputs."""
        ref = getattr(reference, estimator)(*args, **kwargs)
        errors = {b.name: float(rel_err(b(estimator, *args, **kwargs), ref)) for b in self.backends}
        self._checked.add(estimator)
        for n, e in errors.items():
            self._check_errors[n] = max(e, self._check_errors.get(n, 0.0))
        bad = {n: e for n, e in errors.items() if not e <= EQUIVALENCE_TOL}
        if bad:
            raise CreditMismatchError(
                f"credit assignment: {estimator} of " + ", ".join(f"{n} (relative error {e:.3g})" for n, e in bad.items())
                + f" disagrees with the float64 reference on the same batch (tolerance {EQUIVALENCE_TOL:g})")

    def _measure_shadow(self, estimator: str, args: Sequence, kwargs: dict, out) -> None:
        _synchronize(self.device)
        t0 = time.perf_counter()
        base = self.shadow(estimator, *args, **kwargs)
        _synchronize(self.device)
        self._shadow_s += time.perf_counter() - t0
        self._shadow_errs.append(rel_err(out, base))
        self._shadow_wall_s += time.perf_counter() - t0
