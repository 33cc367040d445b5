"""rltrain.machine: the machine, versions and UTC date that every results file's ``meta`` carries."""

from __future__ import annotations

import datetime
import os
import platform
import stat
import time

import pytest
import torch

from rltrain import machine
from rltrain.runtime import num_cores

RESULTS_KEYS = ("device_name", "driver", "cuda", "torch", "triton", "date")  # tests/test_docs.py's


def fake_nvidia_smi(tmp_path, monkeypatch, body: str) -> None:
    """An ``nvidia-smi`` first on ``PATH`` that runs the shell ``body``."""
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")


def test_cpu_info_names_the_processor_versions_and_utc_date(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, "exit 9")  # a machine whose nvidia-smi fails
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    info = machine.machine_info("cpu")
    after = datetime.datetime.now(datetime.timezone.utc)
    assert set(RESULTS_KEYS) | {"python", "cpu_cores", "cpu_model", "envpool"} == set(info)
    date = datetime.datetime.fromisoformat(info["date"])
    assert date.utcoffset() == datetime.timedelta(0) and before <= date <= after and date.microsecond == 0
    assert info["device_name"].startswith("cpu (") and info["device_name"].endswith(")")
    assert info["driver"] is None
    assert info["cuda"] == torch.version.cuda and info["torch"] == torch.__version__
    assert info["python"] == platform.python_version() and info["cpu_cores"] == num_cores()
    import envpool

    assert info["envpool"] == envpool.__version__


def test_cpu_model_is_the_first_model_name_of_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC  9454 48-Core Processor\n"
                       "processor\t: 1\nmodel name\t: AMD EPYC 9454 48-Core Processor\n")
    assert machine.cpu_model(str(cpuinfo)) == "AMD EPYC 9454 48-Core Processor"
    assert machine.cpu_model(str(tmp_path / "missing")) == (platform.processor() or None)


def test_driver_is_the_first_gpus_version(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, 'echo 580.159.04; echo 580.159.04')  # two GPUs, one line each
    assert machine.nvidia_driver() == "580.159.04"
    assert machine.machine_info("cpu")["driver"] == "580.159.04"


def test_driver_query_gives_up_after_its_timeout(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, "exec sleep 30")
    t0 = time.perf_counter()
    assert machine.nvidia_driver(timeout_s=0.5) is None
    assert time.perf_counter() - t0 < 10


def test_driver_is_none_without_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nvidia-smi anywhere
    assert machine.nvidia_driver() is None


def test_missing_package_has_no_version():
    assert machine.package_version("no_such_package_for_rltrain") is None
    assert torch.__version__.startswith(machine.package_version("torch"))  # metadata may drop a "+cu130" tag


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_info_names_the_gpu_and_its_driver():
    info = machine.machine_info()  # the default: the CUDA device where there is one
    assert info["device_name"] == torch.cuda.get_device_name(0)
    assert all(info[k] for k in RESULTS_KEYS), info


def test_a_recorded_command_names_no_folder_of_the_measuring_machine(tmp_path):
    """Paths inside the checkout become relative, paths outside it ``DIR/<name>``; other arguments stay."""
    root = tmp_path / "checkout"
    (root / "docs").mkdir(parents=True)
    argv = ["scripts/bench_kernels.py", "--quick", "--out", str(tmp_path / "out" / "grid.json"),
            f"--json={root / 'docs' / 'e.json'}", "--shapes", "4096x128", str(root / "docs")]
    assert machine.recorded_args(argv, root) == [
        "scripts/bench_kernels.py", "--quick", "--out", "DIR/grid.json", "--json=docs/e.json", "--shapes", "4096x128",
        "docs"]
