"""GAE's fused kernel compiled for sm_90 on a machine without a GPU, as a ``[T, N]`` launch
specialises it (unit environment strides, 16-divisible row strides and pointers, truncations, no
``next_values``, one chunk's block shape): per block shape the SASS instruction counts by kind, the
registers and spills ``ptxas`` reports, and the shared memory. Triton's bundled ``ptxas`` and
``cuobjdump`` do the work; for the H200's codegen put Triton 3.6 first on the path (e.g.
``pip install --no-deps --target DIR triton==3.6.0``; the figures in docs/perf.md came from that):

  PYTHONPATH=DIR:. python docs/bench/run_edges/sass_counts.py 128,16,4,runs 16,32,1,runs 64,64,4,runs,4

Each shape is ``block_t,block_n,warps[,runs][,stages]``; every tile holds its steps latest first."""
import collections
import importlib
import inspect
import os
import re
import subprocess
import sys
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels._launch import LaunchConfig, successors_from_runs, time_threads

gae = importlib.import_module("kernels.gae")
KINDS = ("LDGSTS", "LDG", "STG", "SHFL", "BAR", "LDS", "STS", "FFMA", "FMUL", "FSEL", "ISETP", "IMAD")
POINTER_TYPES = {"term_ptr": "*u8", "trunc_ptr": "*u8"}


def compile_gae(config: LaunchConfig, workdir: str) -> str:
    params = list(inspect.signature(gae._gae_kernel.fn).parameters)
    signature, constants, attrs = {}, {}, {}
    values = dict(HAS_TRUNC=True, HAS_NEXT=False, ACC=tl.float32, BLOCK_T=config.block_t, BLOCK_N=config.block_n,
                  LOOKBACK=False, NUM_STAGES=config.num_stages, SHUFFLE_TIME=0, LATEST_FIRST=True,
                  TIME_THREADS=time_threads(config, 4) if config.thread_runs else 1,
                  RUN_SUCCESSORS=successors_from_runs(config, 4, False))
    for i, name in enumerate(params):
        if name in values or (name.startswith("s_") and name.endswith("_n")) or name == "s_boot":
            signature[name] = "constexpr"
            constants[(i,)] = values.get(name, 1)
        elif name.endswith("_ptr") or name in ("ws", "flags"):
            signature[name] = POINTER_TYPES.get(name, "*fp32")
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "i32"
            if name == "N" or (name.startswith("s_") and name.endswith("_t")):
                attrs[(i,)] = [["tt.divisibility", 16]]
    kernel = triton.compile(ASTSource(fn=gae._gae_kernel, signature=signature, constexprs=constants, attrs=attrs),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": config.num_warps})
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    ptx, cubin = os.path.join(workdir, "k.ptx"), os.path.join(workdir, "k.cubin")
    open(ptx, "w").write(kernel.asm["ptx"])
    ptxas = subprocess.run([os.path.join(tools, "ptxas"), "-v", "-arch=sm_90a", ptx, "-o", cubin],
                           capture_output=True, text=True).stderr
    sass = subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", cubin], capture_output=True, text=True).stdout
    ops = [line.split("*/")[1].split()[0:2] for line in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]
    kinds = collections.Counter((op[1] if op[0].startswith("@") else op[0]).split(".")[0] for op in ops if op)
    usage = " ".join(re.findall(r"Used \d+ registers|\d+ bytes spill stores", ptxas))
    return (f"{sum(kinds.values())} instructions, " + " ".join(f"{k}={kinds[k]}" for k in KINDS)
            + f"; {usage}; shared {kernel.metadata.shared} B")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as workdir:
        for spec in sys.argv[1:]:
            block_t, block_n, warps, *rest = spec.split(",")
            stages = [int(x) for x in rest if x.isdigit()]
            config = LaunchConfig(int(block_t), int(block_n), int(warps), thread_runs="runs" in rest,
                                  num_stages=stages[0] if stages else 1)
            print(spec, compile_gae(config, workdir), flush=True)
