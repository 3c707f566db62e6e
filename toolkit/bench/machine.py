"""What a benchmark ran on: CPU, cores, load, accelerator, and the versions that matter."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from toolkit.common.versions import versions


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# the instruction sets that decide fp32 and int8 matmul speed (int8 pays most with VNNI)
SIMD_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """Which of SIMD_FLAGS the CPU has, from /proc/cpuinfo's flags line ([] where unknown)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            return [flag for flag in SIMD_FLAGS if flag in have]
    return []


def cpu_text(machine: dict) -> str:
    """'MODEL (flag, flag, ...)': the CPU line of a report."""
    flags = machine.get("cpu_flags")
    if flags is None:
        return machine["cpu"]
    return f"{machine['cpu']} ({', '.join(flags) if flags else 'no AVX2'})"


def last_level_cache_bytes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """Size of CPU 0's highest-level cache (the L3 on x86) from sysfs; None where unknown."""
    best: tuple[int, int] | None = None
    for index in root.glob("index*"):
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip().upper()  # "32768K"
            size = int(text.rstrip("KMG")) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
        except (OSError, ValueError, IndexError):
            continue
        if best is None or (level, size) > best:
            best = (level, size)
    return None if best is None else best[1]


def nvidia_gpus(fields: tuple[str, ...] = ("name", "driver_version", "memory.total")) -> list[str]:
    """One line per NVIDIA GPU from nvidia-smi (its `fields`, comma-separated), or none."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def gpu_name() -> str | None:
    """The first NVIDIA GPU's name and driver from nvidia-smi, or None."""
    gpus = nvidia_gpus(("name", "driver_version"))
    return gpus[0] if gpus else None


def describe() -> dict:
    """CPU model, core count, load average, GPU, OS and package versions, right now."""
    try:
        matplotlib = metadata.version("matplotlib")
    except metadata.PackageNotFoundError:
        matplotlib = "missing"
    return {
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cores": os.cpu_count(),
        "last_level_cache_bytes": last_level_cache_bytes(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "gpu": gpu_name(),
        "os": platform.platform(),
        "versions": {"python": platform.python_version(), **versions(), "matplotlib": matplotlib},
    }
