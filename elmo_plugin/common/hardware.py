"""
What the machine can do: whether a device has native bfloat16 arithmetic (elsewhere PyTorch
emulates it, many times slower than float32), and a description of it for benchmark headers.
"""
import platform
import time
from typing import FrozenSet, NamedTuple, Optional, Tuple, Union

import torch

CPUINFO = "/proc/cpuinfo"

# The x86 instructions that multiply bfloat16 in hardware, by their /proc/cpuinfo flag:
# AVX512-BF16 (Intel Cooper Lake and later Xeons, AMD Zen 4 and later) and AMX (Intel Sapphire
# Rapids and later); and Arm's BF16 extension (Armv8.6; e.g. AWS Graviton3).
_BFLOAT16_FLAGS = (("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX"), ("bf16", "BF16"))

# The vector extensions that `describe_cpu` lists, by /proc/cpuinfo flag.
_X86_EXTENSIONS = (("avx2", "AVX2"), ("avx512f", "AVX512F"), ("avx512_bf16", "AVX512_BF16"), ("amx_bf16", "AMX"))
_ARM_EXTENSIONS = (("asimd", "NEON"), ("sve", "SVE"), ("bf16", "BF16"))


class Bfloat16Support(NamedTuple):
    """Whether a device multiplies bfloat16 natively, and a sentence naming the hardware that says why."""

    native: bool
    reason: str


def _cpuinfo_value(keys: Tuple[str, ...], skip_empty: bool = False) -> Optional[str]:
    """The first value of one of ``keys`` in ``/proc/cpuinfo``; ``None`` without one."""
    try:
        with open(CPUINFO, encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() in keys and not (skip_empty and not value.strip()):
                    return value
    except OSError:
        pass
    return None


def cpu_flags() -> Optional[FrozenSet[str]]:
    """
    The CPU's feature flags, lower case, from ``/proc/cpuinfo``; elsewhere those PyTorch's CPU
    detection knows (x86 only), else ``None``: unknown.
    """
    flags = _cpuinfo_value(("flags", "Features"))
    if flags is not None:
        return frozenset(flags.lower().split())
    # torch.cpu's private checks (PyTorch 2.1+), mapped to the Linux names. AMX-TILE stands for
    # AMX-BF16: every CPU with AMX so far has both.
    checks = {
        "avx2": "_is_avx2_supported",
        "avx512f": "_is_avx512_supported",
        "avx512_bf16": "_is_avx512_bf16_supported",
        "amx_bf16": "_is_amx_tile_supported",
    }
    if not all(hasattr(torch.cpu, check) for check in checks.values()):
        return None
    return frozenset(flag for flag, check in checks.items() if getattr(torch.cpu, check)())


def cpu_model_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``), else what `platform` knows."""
    name = _cpuinfo_value(("model name",), skip_empty=True)
    if name is not None:
        return " ".join(name.split())
    return platform.processor() or platform.machine() or "unknown CPU"


def bfloat16_support(device: Union[torch.device, str]) -> Bfloat16Support:
    """
    Whether ``device`` multiplies bfloat16 in hardware, and why: a CPU's `cpu_flags` (AVX512-BF16,
    AMX, Arm's BF16), a GPU's `torch.cuda.is_bf16_supported` without emulation; any other device
    type is not known here, so not native.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return _cpu_bfloat16_support()
    if device.type == "cuda":
        return _cuda_bfloat16_support(device)
    return Bfloat16Support(False, f"elmo_plugin cannot tell whether '{device.type}' devices have native bfloat16")


def _cpu_bfloat16_support() -> Bfloat16Support:
    model = cpu_model_name()
    flags = cpu_flags()
    if flags is None:
        return Bfloat16Support(
            False,
            f"cannot read the instruction set of CPU '{model}' (no {CPUINFO}; PyTorch's "
            f"CPU capability: {torch.backends.cpu.get_cpu_capability()})",
        )
    found = [name for flag, name in _BFLOAT16_FLAGS if flag in flags]
    if found:
        return Bfloat16Support(True, f"CPU '{model}' has {'/'.join(found)} instructions")
    return Bfloat16Support(False, f"CPU '{model}' has no AVX512-BF16/AMX instructions")


def _cuda_bfloat16_support(device: torch.device) -> Bfloat16Support:
    name = torch.cuda.get_device_name(device)
    with torch.cuda.device(device):
        try:
            native = torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # PyTorch before 2.3 did not count emulation in the first place
            native = torch.cuda.is_bf16_supported()
    if native:
        return Bfloat16Support(True, f"GPU '{name}' has native bfloat16")
    major, minor = torch.cuda.get_device_capability(device)
    return Bfloat16Support(
        False,
        f"GPU '{name}' (compute capability {major}.{minor}) has no native bfloat16 (Ampere, "
        "8.0, and newer have it)",
    )


def describe_cpu() -> str:
    """The CPU's model name and vector extensions, e.g. ``"AMD EPYC 7B13 (x86_64: AVX2; no AVX512F,
    AVX512_BF16, AMX; PyTorch kernels AVX2)"``."""
    machine = platform.machine() or "unknown architecture"
    flags = cpu_flags()
    if flags is None:
        extensions = "extensions unknown"
    else:
        table = _ARM_EXTENSIONS if machine.lower() in ("aarch64", "arm64") else _X86_EXTENSIONS
        present = [name for flag, name in table if flag in flags]
        absent = [name for flag, name in table if flag not in flags]
        extensions = " ".join(present) or "none of " + ", ".join(absent)
        if present and absent:
            extensions += "; no " + ", ".join(absent)
    return f"{cpu_model_name()} ({machine}: {extensions}; PyTorch kernels {torch.backends.cpu.get_cpu_capability()})"


def describe_run(device: Optional[torch.device] = None) -> str:
    """The header line of a benchmark figure: the machine, `describe_cpu`, torch's version and
    threads, the device (with the GPU's name) when one is given, and today's date."""
    parts = [f"{platform.node()} {describe_cpu()}", f"torch {torch.__version__}",
             f"{torch.get_num_threads()} threads"]
    if device is not None:
        name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
        parts.append(f"device {device}{name}")
    parts.append(time.strftime("%Y-%m-%d"))
    return ", ".join(parts)
