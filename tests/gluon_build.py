"""Build the explicit-layout twins for sm_90 without a GPU (``test_explicit_layout``; run without
``TRITON_INTERPRET``). The JSON argument lists ``[estimator, LaunchConfig fields, options]``, the
options ``true`` for every optional input (``HAS_*``) and ``false`` for none; for each, the PTX's
barrier count, the PTX, and ``ptxas -v``'s report (``None`` when Triton finds no ``ptxas``). Prints
one JSON line."""

import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.experimental.gluon._runtime import GluonASTSource

from kernels import LaunchConfig, _explicit_layout

FLAG_POINTERS = ("term_ptr", "trunc_ptr", "done_ptr", "flag_ptr")


def twin_of(estimator: str):
    module = importlib.import_module(f"kernels.{estimator}")
    return _explicit_layout.TWINS[getattr(module, f"_{estimator}_kernel")]


def build(estimator: str, config: LaunchConfig, options: bool) -> dict:
    """The twin as a contiguous float32 ``[T, N]`` launch specialises it (unit environment strides,
    16-divisible row strides and pointers), reverse where it may be."""
    kernel = twin_of(estimator)
    values = dict(ACC=tl.float32, BLOCK_T=config.block_t, BLOCK_N=config.block_n, LOOKBACK=False, NUM_STAGES=1,
                  SHUFFLE_TIME=0, LATEST_FIRST=False, STARTS_AT=False, REVERSE=True,
                  TIME_THREADS=_explicit_layout.time_threads(config.block_t, config.num_warps))
    signature, constants, attrs = {}, {}, {}
    for i, param in enumerate(kernel.params):
        name = param.name
        if param.is_constexpr:
            signature[name], constants[(i,)] = "constexpr", options if name.startswith("HAS_") else values[name]
        elif (name.startswith("s_") and name.endswith("_n")) or name in ("s_boot", "s_init"):
            signature[name], constants[(i,)] = "constexpr", 1
        elif name.endswith("_ptr") or name in ("ws", "flags"):
            signature[name] = "*u8" if name in FLAG_POINTERS else "*fp32"
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "i32"
            if name == "N" or (name.startswith("s_") and name.endswith("_t")):
                attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(GluonASTSource(fn=kernel, signature=signature, constexprs=constants, attrs=attrs),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": config.num_warps})
    ptx = compiled.asm["ptx"]
    ptxas = get_ptxas(90).path  # the ptxas Triton itself assembles sm_90 code with
    report = None
    if ptxas and os.path.exists(ptxas):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "twin.ptx")
            with open(path, "w") as f:
                f.write(ptx)
            report = subprocess.run([ptxas, "-v", "-arch=sm_90a", path, "-o", os.path.join(tmp, "twin.cubin")],
                                    capture_output=True, text=True).stderr
    return {"barriers": ptx.count("bar.sync"), "ptx": ptx, "ptxas": report}


if __name__ == "__main__":
    print(json.dumps([[estimator, fields, options, build(estimator, LaunchConfig(*fields), options)]
                      for estimator, fields, options in json.loads(sys.argv[1])]))
