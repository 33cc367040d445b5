"""Windowed look-back for wide tiles, on the current kernels: .devrun/var5/<name>/kernels."""
import shutil
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
P = {
    "win64": [("_scan.py", "WINDOWED_LOOKBACK_MAX_N = tl.constexpr(16)", "WINDOWED_LOOKBACK_MAX_N = tl.constexpr(64)")],
    "win64w4": [("_scan.py", "WINDOWED_LOOKBACK_MAX_N = tl.constexpr(16)", "WINDOWED_LOOKBACK_MAX_N = tl.constexpr(64)"),
                ("_scan.py", "LOOKBACK_WINDOW = tl.constexpr(8)", "LOOKBACK_WINDOW = tl.constexpr(4)")],
}
for name, patches in P.items():
    dst = ROOT / ".devrun" / "var5" / name / "kernels"
    if dst.parent.exists():
        shutil.rmtree(dst.parent)
    shutil.copytree(ROOT / "kernels", dst, ignore=shutil.ignore_patterns("__pycache__"))
    for f, old, new in patches:
        s = (dst / f).read_text()
        assert s.count(old) == 1, (name, f, old[:40])
        (dst / f).write_text(s.replace(old, new))
    print("made", name)
