"""The shared formats of the results tables: a time in microseconds, and the line under a table that
says where and when its figures were measured."""

from __future__ import annotations


def us(v) -> str:
    """A time in microseconds: one decimal below 1000 us, none from there; ``-`` where missing."""
    return "-" if v is None else (f"{v:.1f}" if v < 1000 else f"{v:.0f}")


def machine(meta: dict) -> str:
    """The line under a results table that says where and when its figures were measured: the device
    or, where they come from several, each of ``devices`` (``x gpu_count``, ``(sms SMs)``), driver,
    CUDA, NCCL, torch, Triton, EnvPool, CPU cores and model(s), the process
    group's backend, the date and a device-to-device copy's bandwidth -- the optional ones where ``meta``
    has them (``rltrain.machine.machine_info`` writes the common keys)."""
    def value(key: str):
        return "?" if meta.get(key) is None else meta[key]
    device = " / ".join(meta["devices"]) if meta.get("devices") else value("device_name")
    name = f"{device}" + (f" x {meta['gpu_count']}" if meta.get("gpu_count") else "") \
        + (f" ({meta['sms']} SMs)" if meta.get("sms") else "")
    parts = [name, f"driver {value('driver')}", f"CUDA {value('cuda')}"]
    parts += [f"NCCL {value('nccl')}"] if "nccl" in meta else []
    parts += [f"torch {value('torch')}", f"Triton {value('triton')}"]
    parts += [f"EnvPool {value('envpool')}"] if "envpool" in meta else []
    cpus = meta.get("cpu_models") or ([meta["cpu_model"]] if meta.get("cpu_model") else [])
    cpu = f" ({' / '.join(cpus)})" if cpus else ""
    parts += [f"{value('cpu_cores')} CPU cores{cpu}"] if "cpu_cores" in meta else []
    parts += [str(meta["dist_backend"])] if meta.get("dist_backend") else []
    line = ", ".join(parts) + f"; {str(value('date'))[:10]}"
    if meta.get("copy_gbs"):
        line += f"; device-to-device copy {meta['copy_gbs']:.0f} GB/s"
    return line + "."
