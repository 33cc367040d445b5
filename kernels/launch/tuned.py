"""Tuned launches of one device, as data: ``kernels/launch/tuned/<device slug>.json``.

A table is written by ``scripts/tune_kernels.py`` from a sweep on its device and maps a key
``<family>/<layout>/<dtype>/T<t>/N<n>`` to the fastest launch measured there::

    {"device": "NVIDIA H100 80GB HBM3", "date": "...", "torch": "...", "triton": "...",
     "entries": {"gae/tn/float32/T128/N4096": {"config": {"block_t": 32, "block_n": 64, "num_warps": 4,
                                                           "lookback": false, "num_stages": 2},
                                                "us": 9.1, "heuristic_us": 9.9}, ...}}

``family`` groups estimators that share a kernel shape (``FAMILIES``), ``layout`` is ``tn`` or ``nt``
(time the stride-1 axis), ``dtype`` the float inputs' dtype, and ``t``/``n`` the shape's bucket:
T and N rounded up to powers of two. A device without a table, or a key its table lacks, gets
the heuristic (``kernels.launch.heuristic``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional

from kernels._triton import triton
from kernels.launch.config import LaunchConfig

TABLES = Path(__file__).with_name("tuned")
FAMILIES = ("gae", "vtrace", "retrace", "returns", "forward")
LAYOUTS = ("tn", "nt")
DTYPES = ("float16", "bfloat16", "float32", "float64")
_KEY = re.compile(r"(?P<family>[a-z_]+)/(?P<layout>[a-z]+)/(?P<dtype>[a-z0-9]+)/T(?P<t>\d+)/N(?P<n>\d+)")


def device_slug(name: str) -> str:
    """A device name as a file name: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def bucket(size: int) -> int:
    """The bucket of a length: rounded up to a power of two."""
    return triton.next_power_of_2(max(1, int(size)))


def key(family: str, time_contiguous: bool, dtype_name: str, T: int, N: int) -> str:
    """The table key of a problem (module docstring)."""
    return f"{family}/{'nt' if time_contiguous else 'tn'}/{dtype_name}/T{bucket(T)}/N{bucket(N)}"


def check_table(table: dict, where: str = "table") -> dict[str, LaunchConfig]:
    """The entries of a table as ``{key: LaunchConfig}``, or a ``ValueError`` naming what is wrong:
    the schema, a key no problem maps to, or a config ``LaunchConfig`` refuses."""
    for field in ("device", "date", "torch", "triton", "entries"):
        if field not in table:
            raise ValueError(f"{where}: missing field {field!r}")
    if not isinstance(table["entries"], dict):
        raise ValueError(f"{where}: 'entries' must be an object of key -> entry")
    configs = {}
    for name, entry in table["entries"].items():
        match = _KEY.fullmatch(name)
        if match is None:
            raise ValueError(f"{where}: key {name!r} is not <family>/<layout>/<dtype>/T<t>/N<n>")
        t, n = int(match["t"]), int(match["n"])
        if (match["family"] not in FAMILIES or match["layout"] not in LAYOUTS or match["dtype"] not in DTYPES
                or t != bucket(t) or n != bucket(n)):
            raise ValueError(f"{where}: key {name!r} is reached by no problem (families {FAMILIES}, layouts "
                             f"{LAYOUTS}, dtypes {DTYPES}, T and N powers of two)")
        if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
            raise ValueError(f"{where}: entry {name!r} must be an object with a 'config'")
        try:
            configs[name] = LaunchConfig(**entry["config"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: entry {name!r}: {exc}") from None
    return configs


@lru_cache(maxsize=None)
def table_for(device_name: str, tables: Path = TABLES) -> dict[str, LaunchConfig]:
    """The tuned configs of the device named ``device_name`` (empty when it has no table)."""
    path = tables / f"{device_slug(device_name)}.json"
    if not path.is_file():
        return {}
    return check_table(json.loads(path.read_text()), str(path))


def tuned_config(device_name: str, family: str, time_contiguous: bool, dtype_name: str, T: int,
                 N: int) -> Optional[LaunchConfig]:
    """The device's tuned launch of a problem, or ``None``."""
    return table_for(device_name, TABLES).get(key(family, time_contiguous, dtype_name, T, N))
