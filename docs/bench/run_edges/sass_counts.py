"""An estimator's fused kernel compiled for sm_90 on a machine without a GPU, as a ``[T, N]`` launch
specialises it (``tests/sm90_build.specialisation``: unit environment strides, 16-divisible row
strides and pointers; truncations, no ``next_values``, one chunk's block shape): per block shape
the SASS instruction counts by kind, the instructions of its longest loop (a walk's chunk:
twenty-second session), the registers and spills ``ptxas`` reports, and the shared memory. Triton's
bundled ``ptxas`` and ``cuobjdump`` do the work; for the H200's codegen put Triton 3.6 first on the
path (e.g. ``pip install --no-deps --target DIR triton==3.6.0``; the figures in docs/perf.md came
from that):

  PYTHONPATH=DIR:. python docs/bench/run_edges/sass_counts.py 128,16,4,runs 16,32,1,runs 64,64,4,runs,4
  PYTHONPATH=DIR:. python docs/bench/run_edges/sass_counts.py --estimator vtrace --float bf16 32,32,2,runs,3

Each shape is ``block_t,block_n,warps[,runs][,stages]``; every tile holds its steps latest first."""
import argparse
import collections
import importlib
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests"))
from sm90_build import specialisation  # noqa: E402

KINDS = ("LDGSTS", "LDG", "STG", "SHFL", "BAR", "LDS", "STS", "FFMA", "FMUL", "FSEL", "ISETP", "IMAD")
ITEMSIZES = {"fp32": 4, "bf16": 2, "fp16": 2}


def compile_kernel(estimator: str, float_type: str, config: LaunchConfig, workdir: str) -> str:
    kernel = getattr(importlib.import_module(f"kernels.{estimator}"), f"_{estimator}_kernel")
    itemsize = ITEMSIZES[float_type]
    values = dict(HAS_TRUNC=True, HAS_NEXT=False, ACC=tl.float32, BLOCK_T=config.block_t, BLOCK_N=config.block_n,
                  LOOKBACK=False, NUM_STAGES=config.num_stages, SHUFFLE_TIME=0, LATEST_FIRST=True,
                  TIME_THREADS=time_threads(config, itemsize) if config.thread_runs else 1,
                  RUN_SUCCESSORS=successors_from_runs(config, itemsize, False))
    signature, constants, attrs = specialisation(kernel, values, float_type)
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constants, attrs=attrs),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": config.num_warps})
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    ptx, cubin = os.path.join(workdir, "k.ptx"), os.path.join(workdir, "k.cubin")
    open(ptx, "w").write(compiled.asm["ptx"])
    ptxas = subprocess.run([os.path.join(tools, "ptxas"), "-v", "-arch=sm_90a", ptx, "-o", cubin],
                           capture_output=True, text=True).stderr
    sass = subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", cubin], capture_output=True, text=True).stdout
    lines = [line for line in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]
    kinds = collections.Counter(opcode(line) for line in lines)
    usage = " ".join(re.findall(r"Used \d+ registers|\d+ bytes spill stores", ptxas))
    return (f"{sum(kinds.values())} instructions ({longest_loop(lines)} in the longest loop), "
            + " ".join(f"{k}={kinds[k]}" for k in KINDS) + f"; {usage}; shared {compiled.metadata.shared} B")


def opcode(line: str) -> str:
    """A SASS line's opcode without its modifiers or predicate."""
    words = line.split("*/")[1].split()
    return (words[1] if words[0].startswith("@") else words[0]).split(".")[0]


def longest_loop(lines: list) -> int:
    """Instructions between a backward branch and its target, for the branch that spans the most."""
    address = [int(re.match(r"\s+/\*([0-9a-f]{4})\*/", line).group(1), 16) for line in lines]
    longest = 0
    for i, line in enumerate(lines):
        target = re.search(r"BRA (0x[0-9a-f]+)", line)
        if target and int(target.group(1), 16) in address[:i]:
            longest = max(longest, i - address.index(int(target.group(1), 16)) + 1)
    return longest


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimator", default="gae")
    parser.add_argument("--float", dest="float_type", default="fp32", choices=sorted(ITEMSIZES))
    parser.add_argument("shapes", nargs="+")
    cli = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        for spec in cli.shapes:
            block_t, block_n, warps, *rest = spec.split(",")
            stages = [int(x) for x in rest if x.isdigit()]
            config = LaunchConfig(int(block_t), int(block_n), int(warps), thread_runs="runs" in rest,
                                  num_stages=stages[0] if stages else 1)
            print(spec, compile_kernel(cli.estimator, cli.float_type, config, workdir), flush=True)
