"""Compile the prototype for sm_90 without a GPU (Triton 3.6 first on the path): SASS counts."""
import collections, os, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
sys.path.insert(0, os.path.dirname(__file__))
import gluon_gae as G

def compile_one(block_t, tpw_t, warps, lf, spt_n=1, wt=1, dtype="*fp32"):
    sig = dict(r_ptr=dtype, v_ptr=dtype, term_ptr="*u8", trunc_ptr="*u8", boot_ptr=dtype, adv_ptr=dtype,
               ret_ptr=dtype, T="i32", N="i32", gamma="fp32", lam="fp32", BLOCK_T="constexpr", TPW_T="constexpr",
               WARPS="constexpr", HAS_TRUNC="constexpr", LATEST_FIRST="constexpr", SPT_N="constexpr", WT="constexpr")
    consts = {(11,): block_t, (12,): tpw_t, (13,): warps, (14,): True, (15,): lf, (16,): spt_n, (17,): wt}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(7)}
    attrs[(8,)] = [["tt.divisibility", 16]]
    k = triton.compile(GluonASTSource(fn=G.gae_tn_kernel, signature=sig, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps * wt})
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    d = tempfile.mkdtemp()
    ptx, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
    open(ptx, "w").write(k.asm["ptx"])
    err = subprocess.run([os.path.join(tools, "ptxas"), "-v", "-arch=sm_90a", ptx, "-o", cubin], capture_output=True, text=True).stderr
    sass = subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", cubin], capture_output=True, text=True).stdout
    ops = [l.split("*/")[1].split()[0:2] for l in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", l)]
    kinds = collections.Counter((op[1] if op[0].startswith("@") else op[0]).split(".")[0] for op in ops if op)
    regs = re.findall(r"Used \d+ registers|\d+ bytes spill stores|\d+ bytes smem", err)
    vec = collections.Counter(op[0] if not op[0].startswith("@") else op[1] for op in ops if op and "LDG" in " ".join(op))
    print(block_t, tpw_t, warps, lf, spt_n, wt, dict(vec), sum(kinds.values()), {k: kinds[k] for k in ("LDG", "STG", "SHFL", "BAR", "LDS", "STS", "FFMA", "FMUL")}, regs)

for args in [(128, 32, 1, True, 4), (128, 16, 1, True, 4), (128, 16, 1, True, 2), (128, 8, 1, True, 4, 4), (128, 8, 1, True, 4, 2), (128, 16, 1, True, 4, 2), (128, 4, 1, True, 1)]:
    compile_one(*args)
