"""The sweep's tiles built for sm_90 without a GPU (``tests/sm90_build.py``, this machine's Triton): V-trace's
float32 ``[T, N]`` kernel with truncations, in the form that stores ``x`` (``PG_IS_X``) and the other, with
``ptxas``' registers and spill bytes and the SASS instruction count, for predictions before the sweep runs.

  env -u TRITON_INTERPRET PYTHONPATH=.:tests python docs/bench/vtrace_f32_form/regs.py > regs.log
"""
import re
import sys

sys.path[:0] = ["docs/bench/vtrace_f32_form"]
import cells  # noqa: E402
import sm90_build  # noqa: E402

import bench_kernels as B  # noqa: E402  (cells put scripts/ on the path)


def resources(config, pg_is_x: bool) -> str:
    build = sm90_build.build("vtrace", config, False, overrides=dict(HAS_TRUNC=True, PG_IS_X=pg_is_x))
    report, sass = build["ptxas"] or "", build["sass"] or ""
    registers = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    instructions = sum(1 for line in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line))
    return (f"{registers.group(1) if registers else '?':>3} registers, "
            f"{'/'.join(spills.groups()) if spills else '?':>9} B spilled (stores/loads), {instructions:4d} SASS")


if __name__ == "__main__":
    print("N x T, label, tile: form that stores x | the other form (Triton " + sm90_build.triton.__version__ + ")")
    built = {}
    for N, T, labels in cells.sweep_jobs():
        _, shapes = cells.calls_of(N, T, labels)
        for label, config in shapes.items():
            if config not in built:
                built[config] = f"{resources(config, True)} | {resources(config, False)}"
            print(f"{N:>6} x {T:<8} {label:34s} {B.config_label(config):44s} {built[config]}", flush=True)
