"""Import Triton when it is there, and decide which tensors run the Triton kernels.

Without Triton (macOS, Windows, a bare install) every module still imports: ``triton.jit`` becomes
the identity and ``tl.constexpr`` a placeholder, so kernel definitions are inert and every call
takes the PyTorch path.

CUDA tensors run the Triton kernels. CPU tensors run the PyTorch path, except when
``TRITON_INTERPRET=1`` was set before import: then Triton's interpreter runs the same kernels on the
CPU, which is how the tests exercise the real kernels on a machine with no GPU.
"""

from __future__ import annotations

import os

import torch

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # pragma: no cover - exercised only where Triton is absent
    HAVE_TRITON = False

    class _InertTriton:
        @staticmethod
        def jit(fn=None, **_):
            return fn if fn is not None else (lambda f: f)

        @staticmethod
        def cdiv(a, b):
            return -(-a // b)

        @staticmethod
        def next_power_of_2(n):
            return 1 << max(0, int(n) - 1).bit_length()

    class _InertLanguage:
        constexpr = object
        float32 = float64 = None

    triton = _InertTriton()
    tl = _InertLanguage()

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def runs_triton(device: torch.device) -> bool:
    """True when tensors on ``device`` are computed by the Triton kernels."""
    return HAVE_TRITON and (device.type == "cuda" or INTERPRET)


def _install_row_wise_interpreter_scan() -> None:
    """Make ``tl.associative_scan`` under Triton's interpreter combine whole rows at a time.

    The interpreter's generic scan calls the combine function once per *element* from Python,
    which makes a 1000 x 70 tile walk take half a minute. This replacement computes the same
    sequential scan along the scan axis but hands the combine function whole slices (numpy
    vectors), so it is called once per step of the scanned axis. Results are identical; only
    the interpreter is touched, and only if its internals look as expected.
    """
    try:
        import numpy as np
        from triton.runtime.interpreter import ScanOps
    except ImportError:  # pragma: no cover - other Triton layouts keep the stock scan
        return
    if not hasattr(ScanOps, "generic_scan") or not hasattr(ScanOps, "to_tensor"):  # pragma: no cover
        return

    def generic_scan(self, inputs):
        rows = [np.moveaxis(arg.handle.data, self.axis, 0) for arg in inputs]
        outputs = [np.empty_like(r) for r in rows]
        acc = None
        for i in range(rows[0].shape[0]):
            current = tuple(self.to_tensor(np.ascontiguousarray(r[i]), arg.dtype) for r, arg in zip(rows, inputs))
            if acc is None:
                acc = current
            else:
                combined = self.combine_fn.fn(*acc, *current)
                acc = combined if isinstance(combined, tuple) else (combined,)
            for out, value in zip(outputs, acc):
                out[i] = value.handle.data
        return [
            self.to_tensor(np.ascontiguousarray(np.moveaxis(out, 0, self.axis)), arg.dtype)
            for out, arg in zip(outputs, inputs)
        ]

    ScanOps.generic_scan = generic_scan


def _install_scalar_index_for_older_interpreters() -> None:
    """Make a scalar tensor's ``__index__`` under Triton's interpreter take its one element.

    The interpreter holds scalars as arrays of shape ``(1,)``; up to Triton 3.6 it turned them into
    Python ints (a ``range`` bound, e.g. a look-back tile's chunks) by ``int(array)``, which NumPy 2.4
    refuses for arrays of one dimension. Later Triton squeezes the array first; this does the same for
    every version, at the point where the interpreter patches ``tl.tensor`` for a kernel call (and
    restores it after)."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - other Triton layouts keep their own
        return
    patch_tensor = getattr(interpreter, "_patch_lang_tensor", None)
    if patch_tensor is None:  # pragma: no cover
        return

    def patch_tensor_with_scalar_index(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    interpreter._patch_lang_tensor = patch_tensor_with_scalar_index


if HAVE_TRITON and INTERPRET:
    _install_row_wise_interpreter_scan()
    _install_scalar_index_for_older_interpreters()
