"""Build GAE's explicit-layout twin for sm_90 without a GPU (``test_explicit_layout``; run without
``TRITON_INTERPRET``): for each ``LaunchConfig`` field list in the JSON argument, with and without
``next_values``, the PTX's barrier count, the PTX, and ``ptxas -v``'s report (``None`` when Triton finds
no ``ptxas``). Prints one JSON line."""

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

KERNEL = importlib.import_module("kernels.gae")._gae_explicit_kernel
FLAG_POINTERS = ("term_ptr", "trunc_ptr")


def build(config: LaunchConfig, has_next: bool) -> dict:
    """The twin as a contiguous float32 ``[T, N]`` launch specialises it (unit environment strides,
    16-divisible row strides and pointers, truncations)."""
    values = dict(HAS_TRUNC=True, HAS_NEXT=has_next, ACC=tl.float32, BLOCK_T=config.block_t, BLOCK_N=config.block_n,
                  LOOKBACK=False, NUM_STAGES=1, SHUFFLE_TIME=0, LATEST_FIRST=False,
                  TIME_THREADS=_explicit_layout.time_threads(config.block_t, config.num_warps))
    signature, constants, attrs = {}, {}, {}
    for i, name in enumerate(inspect.signature(KERNEL.fn).parameters):
        if name in values or (name.startswith("s_") and name.endswith("_n")) or name == "s_boot":
            signature[name], constants[(i,)] = "constexpr", values.get(name, 1)
        elif name.endswith("_ptr") or name in ("ws", "flags"):
            signature[name] = "*u8" if name in FLAG_POINTERS else "*fp32"
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "i32"
            if name == "N" or (name.startswith("s_") and name.endswith("_t")):
                attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(GluonASTSource(fn=KERNEL, signature=signature, constexprs=constants, attrs=attrs),
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
    results = []
    for fields in json.loads(sys.argv[1]):
        config = LaunchConfig(*fields)
        for has_next in (False, True):
            results.append([[config.block_t, config.block_n, has_next], build(config, has_next)])
    print(json.dumps(results))
