"""Cost of a flag stream: GAE 8192 x 4096 with/without `truncated`, and with flags as uint8 / float32."""
import sys, torch
sys.path.insert(0, "scripts")
import bench_kernels as B, kernels
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
print("copy", round(copy))
for layout in ("nt", "tn"):
    args, kw = B.make_inputs("gae", 8192, 4096, layout, torch.float32, "cuda", seed=0)
    r, v, term, boot = args
    trunc = kw["truncated"]
    cases = {
        "bool term+trunc": (lambda: kernels.gae(r, v, term, boot, truncated=trunc, time_dim=kw.get("time_dim", 0)), 18),
        "bool term only": (lambda: kernels.gae(r, v, term, boot, time_dim=kw.get("time_dim", 0)), 17),
        "f32 term+trunc": (lambda: kernels.gae(r, v, term.float(), boot, truncated=trunc.float(), time_dim=kw.get("time_dim", 0)), 24),
    }
    tf, trf = term.float(), trunc.float()
    cases["f32 term+trunc"] = (lambda: kernels.gae(r, v, tf, boot, truncated=trf, time_dim=kw.get("time_dim", 0)), 24)
    for name, (fn, bpe) in cases.items():
        fn(); torch.cuda.synchronize()
        us = B.time_us(fn, "cuda", 10, 50)
        print(layout, name, "%.1f us" % us, "%.0f%% of copy" % (100 * 8192 * 4096 * bpe / (us * 1e-6) / 1e9 / copy), flush=True)
    del args, kw, r, v, term, boot, trunc, tf, trf
    torch.cuda.empty_cache()
