"""Where GAE's `[N, T]` rows of 2048-4096 steps at 128-256 environments lose 0.5-0.7 us to rl-triton (a plan for
a session with a GPU; written in the forty-first session, not yet run).

Both libraries give each environment one program that loads its whole row, scans it and stores
(``kernels.gae`` in ``T x 1`` tiles, 8-16 warps). Without truncations rl-triton took 3.4-3.5 us at 128 x 2048
against our 4.0-4.2, 5.2-5.5 at 128 x 4096 against our 5.8-6.1 (``../quarters/few.log``, ``shapes_rival.log``,
device time from CUDA graphs), moving about the same bytes (16 per step against our 17). Two differences are
left after the tenth to thirteenth sessions' block shapes: our kernel stores a second output (the returns)
and scans in reverse (Triton mirrors each value across the lanes before and after a reverse scan), where
rl-triton scans forward over rows loaded latest first (which costs its loads their vectors: our tiles held
latest first ran slower, ``../quarters/few_lf.log``).

``_row_gae`` is GAE without truncations, one program per row, with each difference a switch: ``FORWARD``
(latest first, scanned forward) or not (scanned in reverse), ``RETURNS`` (store ``A + V`` too) or not; the
warps a third. PLAN ``ablation`` times every variant beside ``kernels.gae`` (and rl-triton, when its source
is first on ``PYTHONPATH``, on the same cells with float32 flags) in one process, each checked against the
float64 reference first (the advantages; the returns too where stored), device time per call from CUDA
graphs, inputs rotated through four times the L2, two rounds.

  PYTHONPATH=.[:<rl-triton's src>] python docs/bench/few_rows/rows.py ablation OUT.json
  TRITON_INTERPRET=1 PYTHONPATH=. python docs/bench/few_rows/rows.py ablation OUT.json cpu   # small cells, checks only
"""
import json
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import _scan  # noqa: E402
from kernels._triton import tl, triton  # noqa: E402

CELLS = ((128, 2048), (128, 4096), (256, 2048), (256, 4096), (128, 1024))
CPU_CELLS = ((5, 37), (3, 64))
VARIANTS = [(forward, returns, warps) for forward in (False, True) for returns in (True, False) for warps in (8, 16)]


@triton.jit
def _row_gae(r_ptr, v_ptr, term_ptr, boot_ptr, adv_ptr, ret_ptr, T, row_stride, gamma, lam,
             BLOCK: tl.constexpr, FORWARD: tl.constexpr, RETURNS: tl.constexpr):
    """One ``[N, T]`` row per program: ``A_t = delta_t + gamma lam (1 - d_t) A_{t+1}``, ``A_T = 0``, with
    ``delta_t = r_t + gamma (1 - d_t) V'_t - V_t`` (``V'_t = V_{t+1}``, the bootstrap value at ``T - 1``)."""
    env = tl.program_id(0)
    row = env.to(tl.int64) * row_stride
    i = tl.arange(0, BLOCK)[:, None]  # a [BLOCK, 1] tile, as the kernels' (the interpreter's scan takes rows)
    t = T - 1 - i if FORWARD else i  # FORWARD: position i holds step T - 1 - i, scanned first to last
    ok = i < T
    r = tl.load(r_ptr + row + t, mask=ok, other=0.0)
    v = tl.load(v_ptr + row + t, mask=ok, other=0.0)
    done = tl.load(term_ptr + row + t, mask=ok, other=0) != 0
    v_next = tl.load(v_ptr + row + t + 1, mask=ok & (t + 1 < T), other=0.0)
    v_next = tl.where(t == T - 1, tl.load(boot_ptr + env), v_next)
    alpha = tl.where(ok, r + gamma * tl.where(done, 0.0, v_next) - v, 0.0)
    beta = tl.where(ok & ~done, gamma * lam, tl.where(ok, 0.0, 1.0))
    adv, _ = tl.associative_scan((alpha, beta), 0, _scan.affine_then, reverse=not FORWARD)
    tl.store(adv_ptr + row + t, adv, mask=ok)
    if RETURNS:
        tl.store(ret_ptr + row + t, adv + v, mask=ok)


def row_gae(forward: bool, returns: bool, warps: int):
    """``kernels.gae``'s call (``[N, T]`` float32, no truncations) through ``_row_gae``: ``(adv, ret)`` or ``adv``."""
    def call(args, kwargs):
        rewards, values, terminated, bootstrap = args
        N, T = rewards.shape
        adv = torch.empty_like(rewards)
        ret = torch.empty_like(rewards) if returns else adv
        _row_gae[(N,)](rewards, values, terminated, bootstrap, adv, ret, T, rewards.stride(0),
                       kwargs.get("gamma", 0.99), kwargs.get("lam", 0.95), BLOCK=triton.next_power_of_2(T),
                       FORWARD=forward, RETURNS=returns, num_warps=warps)
        return (adv, ret) if returns else adv
    return call


def rival():
    """rl-triton's GAE (advantages only) when its source is on the path, else ``None``. It takes float32
    flags (``rival_inputs``) and seeds its scan with ``last_value`` (zero here, as the reference's cells)."""
    try:
        from rl_triton import compute_gae  # as ../rl_triton/compare.py calls it (release 0.1.3)
    except ImportError:
        return None
    return lambda args, kwargs: compute_gae(rewards=args[0], values=args[1], terminateds=args[2], last_value=args[3],
                                            gamma=kwargs.get("gamma", 0.99), lambda_=kwargs.get("lam", 0.95))


def calls() -> dict:
    out = {"gae": lambda a, kw: kernels.gae(*a, **kw)}
    out.update({f"row:{'fwd' if f else 'rev'}:{'ret' if r else 'adv'}:{w}w": row_gae(f, r, w) for f, r, w in VARIANTS})
    return out


def our_inputs(args, kwargs):
    """The cell's inputs without truncations and with a zero bootstrap value (rl-triton's scan starts from
    it beyond the window, the reference's does not: with zero both agree)."""
    rewards, values, terminated, bootstrap = args
    return [rewards, values, terminated, torch.zeros_like(bootstrap)], {k: v for k, v in kwargs.items()
                                                                        if k != "truncated"}


def rival_inputs(args, kwargs):
    """``our_inputs`` with float32 flags, made before any call is timed (rl-triton's flag dtype)."""
    args, kwargs = our_inputs(args, kwargs)
    return [args[0], args[1], args[2].float(), args[3]], kwargs


def ablation(out: str, device: str = "cuda") -> None:
    rows = []
    for N, T in CELLS if device == "cuda" else CPU_CELLS:
        nbytes = B.cell_bytes("gae", N, T, torch.float32) - N * T  # no truncation flags
        sets = B.input_set_count(nbytes, device, l2_fills=4, most=200)
        timer = (lambda f: B.graph_us(f, device, 0.0, calls=max(B.GRAPH_CALLS, sets))) if device == "cuda" \
            else (lambda f: 0.0)
        rounds = 2 if device == "cuda" else 1
        times = B.checked_times(calls(), "gae", N, T, "nt", "f32", rounds, 10, 50, device=device,
                                prepare=our_inputs, timer=timer, input_sets=sets)
        if rival() is not None:
            times.update(B.checked_times({"rl_triton": rival()}, "gae", N, T, "nt", "f32", rounds, 10, 50,
                                         device=device, prepare=rival_inputs, timer=timer, input_sets=sets))
        rows.append(dict(N=N, T=T, bytes=nbytes, sets=sets, times=times))
        print(f"gae {N}x{T} nt no-trunc " + "  ".join(
            f"{label}=" + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:40] for x in t)
            for label, t in times.items()), flush=True)
        json.dump(rows, open(out, "w"), indent=1)


if __name__ == "__main__":
    ablation(sys.argv[2], *sys.argv[3:4])
