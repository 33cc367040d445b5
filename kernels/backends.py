"""Named implementations of the estimators, for trainers' ``--ca-backend`` and the benchmark.

``get_backend(name)`` returns a namespace whose estimator functions have the public signatures:

- ``"triton"``: the fused kernels (the public API of :mod:`kernels`);
- ``"loop"``: a PyTorch loop over T with vector ops over N, eager (CleanRL style);
- ``"compile"``: a vectorized log-step scan in PyTorch under ``torch.compile``;
- ``"sequential"``: the fused kernel with one time step per chunk, i.e. one lane per environment
  looping over T (the design of PufferLib's CUDA kernel).

All compute the same semantics; the float64 reference decides. ``trainer_backend`` turns a trainer's
``--ca-backend`` (``"auto"`` too) into one of them and names what runs.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import torch

from kernels import _triton

BACKENDS = ("triton", "loop", "compile", "sequential")
_MODULES = {
    "triton": "kernels",
    "loop": "kernels.baselines.loop",
    "compile": "kernels.baselines.compiled",
    "sequential": "kernels.baselines.sequential",
}


def get_backend(name: str) -> SimpleNamespace:
    """The estimators of backend ``name`` (one of ``BACKENDS``) as a namespace."""
    if name not in _MODULES:
        raise ValueError(f"unknown credit-assignment backend {name!r}; choose one of {BACKENDS}")
    from kernels import ESTIMATORS

    module = importlib.import_module(_MODULES[name])
    return SimpleNamespace(name=name, **{est: getattr(module, est) for est in ESTIMATORS if hasattr(module, est)})


def trainer_backend(name: str, device: torch.device) -> SimpleNamespace:
    """The backend a trainer's ``--ca-backend name`` runs on ``device``: ``"auto"`` is the fused API
    (``"triton"``), but ``"loop"`` on the CPU under ``TRITON_INTERPRET=1`` (where the fused API would
    interpret its kernels in every update). Its ``label`` says what runs, for the run's log: the fused
    API on a device without Triton kernels runs its float64 reference."""
    if name == "auto":
        name = "loop" if device.type == "cpu" and _triton.INTERPRET else "triton"
    backend = get_backend(name)
    reference = name == "triton" and not _triton.runs_triton(device)
    backend.label = f"{name} (float64 reference on {device.type})" if reference else name
    return backend
