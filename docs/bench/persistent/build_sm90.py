"""Build ``prototype._gae_persistent_kernel`` for sm_90 without a GPU and count its asynchronous copies:
whether Triton's software pipeliner loads the next tiles of the persistent loop. Prints, per block
shape, the ``cp.async`` and ``ld.global`` counts of the PTX, the shared memory and ``ptxas -v``'s register
and spill lines. ``LB=0`` in the environment builds the loop without the look-back (wrong answers; for
the count only). Run without ``TRITON_INTERPRET``, with a Triton that has ``ptxas`` (3.6 here):

  LB=1 python docs/bench/persistent/build_sm90.py '[[block_t, block_n, warps, stages, time_threads], ...]'
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource

sys.path.insert(0, os.path.dirname(__file__))
import prototype  # noqa: E402

FLAG_POINTERS = ("term_ptr", "trunc_ptr")


def build(block_t: int, block_n: int, warps: int, stages: int, time_threads: int, look_back: bool) -> str:
    kernel = prototype._gae_persistent_kernel
    values = dict(ACC=tl.float32, BLOCK_T=block_t, BLOCK_N=block_n, NUM_STAGES=stages, TIME_THREADS=time_threads,
                  SUCCESSOR_THREADS=time_threads, LB=look_back)
    signature, constants, attrs = {}, {}, {}
    for i, param in enumerate(kernel.params):
        if param.is_constexpr:
            signature[param.name], constants[(i,)] = "constexpr", values[param.name]
        elif param.name.endswith("_ptr") or param.name in ("ws", "flags"):
            signature[param.name] = ("*u8" if param.name in FLAG_POINTERS else "*i32" if param.name == "flags"
                                     else "*fp32")
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[param.name] = "i32"
            if param.name == "N":
                attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constants, attrs=attrs),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    ptx = compiled.asm["ptx"]
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "k.ptx"), "w") as f:
            f.write(ptx)
        report = subprocess.run([get_ptxas(90).path, "-v", "-arch=sm_90a", os.path.join(tmp, "k.ptx"),
                                 "-o", os.path.join(tmp, "k.cubin")], capture_output=True, text=True).stderr
    lines = [line.split(":")[-1].strip() for line in report.splitlines() if "Used" in line or "spill" in line]
    return (f"{block_t}x{block_n} w{warps} s{stages} runs{time_threads} look-back {look_back}: "
            f"cp.async {ptx.count('cp.async')}, ld.global {len(re.findall(r'ld[.]global', ptx))}, "
            f"shared {compiled.metadata.shared} B, {lines}")


if __name__ == "__main__":
    for shape in json.loads(sys.argv[1]):
        print(build(*shape, look_back=os.environ.get("LB", "1") != "0"))
