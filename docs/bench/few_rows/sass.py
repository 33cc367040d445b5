"""``rows.py``'s variants and ``kernels.gae``'s ``T x 1`` row tiles built for sm_90 without a GPU (this
machine's Triton), as an ``[N, T]`` float32 call without truncations specialises them (rows 16-element
aligned, time the unit stride): registers, and the SASS's instructions, warp shuffles, barriers and global
loads and stores by width, for the predictions in README.md.

  env -u TRITON_INTERPRET PYTHONPATH=.:tests python docs/bench/few_rows/sass.py > docs/bench/few_rows/sass.log
"""
import collections
import importlib
import re
import sys

sys.path[:0] = ["docs/bench/few_rows"]
import rows  # noqa: E402
import sm90_build  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402


INSTRUCTION = re.compile(r"\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def sass_summary(built: dict, warps: int) -> str:
    """One line of ``sm90_build.compile_for_sm90``'s build: registers, instructions, shuffles, barriers,
    global loads and stores by width."""
    report, sass = built["ptxas"], built["sass"]
    ops = collections.Counter(m.group(1) for m in map(INSTRUCTION.match, sass.splitlines()) if m)
    memory = {op: n for op, n in sorted(ops.items()) if op.startswith(("LDG", "STG"))}
    registers = re.search(r"Used (\d+) registers", report).group(1)
    shuffles = sum(n for op, n in ops.items() if op.startswith("SHFL"))
    barriers = sum(n for op, n in ops.items() if op.startswith("BAR.SYNC"))
    return (f"{warps:2d} warps {registers:>3} registers {sum(ops.values()):5d} SASS {shuffles:3d} shuffles "
            f"{barriers:2d} barriers  {memory}")


def build(kernel, signature, constants, attrs, warps):
    source = ASTSource(fn=kernel, signature=signature, constexprs=constants, attrs=attrs)
    return sm90_build.compile_for_sm90(source, warps)


def prototype(block: int, forward: bool, returns: bool, warps: int):
    names = [p.name for p in rows._row_gae.params]
    types = dict(r_ptr="*fp32", v_ptr="*fp32", term_ptr="*u1", boot_ptr="*fp32", adv_ptr="*fp32", ret_ptr="*fp32",
                 T="i32", row_stride="i32", gamma="fp32", lam="fp32")
    values = dict(BLOCK=block, FORWARD=forward, RETURNS=returns)
    signature = {n: "constexpr" if n in values else types[n] for n in names}
    constants = {(i,): values[n] for i, n in enumerate(names) if n in values}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names)
             if n.endswith("_ptr") or n in ("T", "row_stride")}
    return build(rows._row_gae, signature, constants, attrs, warps)


def ours(block: int, warps: int, whole: bool = False):
    """``kernels.gae``'s Triton kernel in a ``block x 1`` tile, ``[N, T]`` (time strides 1, row strides
    16-aligned), no truncations, no ``next_values``; ``whole``: ``WHOLE_SEQUENCE`` (``whole_rows.patch``)."""
    kernel = importlib.import_module("kernels.gae")._gae_kernel  # the module (the package's gae is the function)
    values = dict(HAS_TRUNC=False, HAS_NEXT=False, ACC=tl.float32, BLOCK_T=block, BLOCK_N=1, LOOKBACK=0, NUM_STAGES=1,
                  SHUFFLE_TIME=0, LATEST_FIRST=False, TIME_THREADS=1, ENV_RUNS_OF_FOUR=False, RUN_SUCCESSORS=False,
                  WHOLE_SEQUENCE=whole)
    signature, constants, attrs = sm90_build.specialisation(kernel, values, time_contiguous=True)
    return build(kernel, signature, constants, attrs, warps)


if __name__ == "__main__":
    PATCHED = "WHOLE_SEQUENCE" in importlib.import_module("kernels.gae")._gae_kernel.arg_names
    print(f"Triton {triton.__version__}, sm_90")
    for block in (2048, 4096):
        for warps in (8, 16):
            print(f"T={block:5d} kernels.gae {block}x1            {sass_summary(ours(block, warps), warps)}",
                  flush=True)
            if PATCHED:
                print(f"T={block:5d} kernels.gae {block}x1, patched   {sass_summary(ours(block, warps, True), warps)}",
                      flush=True)
            for forward in (False, True):
                for returns in (True, False):
                    label = f"row:{'fwd' if forward else 'rev'}:{'ret' if returns else 'adv'}"
                    print(f"T={block:5d} {label:28s}{sass_summary(prototype(block, forward, returns, warps), warps)}",
                          flush=True)
