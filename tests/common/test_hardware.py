"""
`elmo_plugin.common.hardware`: native bfloat16 by device (the CPU's flags, read from a fake
``/proc/cpuinfo`` or mocked; CUDA mocked, there is no GPU here) and the CPU line of the
benchmark headers.
"""
import contextlib
from pathlib import Path

import pytest
import torch

from elmo_plugin.common import hardware

# /proc/cpuinfo as Linux writes it, cut to the lines that matter (two processors of each).
EPYC_ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu sse sse2 avx avx2 fma bmi2 sha_ni

processor\t: 1
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu sse sse2 avx avx2 fma bmi2 sha_ni
"""
SAPPHIRE_RAPIDS = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: avx avx2 avx512f avx512bw avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: avx avx2 avx512f avx512bw avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8
"""
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve i8mm bf16 svebf16
CPU implementer\t: 0x41
"""


@pytest.fixture
def cpuinfo(tmp_path: Path, monkeypatch):
    """Points `hardware` at a ``/proc/cpuinfo`` with the given text."""

    def write(text: str) -> None:
        path = tmp_path / "cpuinfo"
        path.write_text(text, encoding="utf-8")
        monkeypatch.setattr(hardware, "CPUINFO", str(path))

    return write


def test_flags_and_model_name_from_cpuinfo(cpuinfo):
    cpuinfo(EPYC_ZEN3)
    assert hardware.cpu_flags() == {"fpu", "sse", "sse2", "avx", "avx2", "fma", "bmi2", "sha_ni"}
    assert hardware.cpu_model_name() == "AMD EPYC 7B13 64-Core Processor"
    cpuinfo(GRAVITON3)  # Arm: "Features", and no model name
    assert {"asimd", "sve", "bf16"} <= hardware.cpu_flags()
    assert hardware.cpu_model_name()  # platform's answer, never empty


def test_without_cpuinfo_pytorch_is_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "CPUINFO", str(tmp_path / "missing"))
    for check, value in [("_is_avx2_supported", True), ("_is_avx512_supported", True),
                         ("_is_avx512_bf16_supported", False), ("_is_amx_tile_supported", True)]:
        monkeypatch.setattr(torch.cpu, check, lambda value=value: value, raising=False)
    assert hardware.cpu_flags() == {"avx2", "avx512f", "amx_bf16"}
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")  # an older PyTorch: unknown
    assert hardware.cpu_flags() is None
    support = hardware.bfloat16_support("cpu")
    assert not support.native
    assert "cannot read the instruction set of CPU" in support.reason
    assert "extensions unknown" in hardware.describe_cpu()


@pytest.mark.parametrize(
    "text, native, reason",
    [
        (EPYC_ZEN3, False,
         "CPU 'AMD EPYC 7B13 64-Core Processor' has no AVX512-BF16/AMX instructions"),
        (SAPPHIRE_RAPIDS, True,
         "CPU 'Intel(R) Xeon(R) Platinum 8480+' has AVX512-BF16/AMX instructions"),
        (SAPPHIRE_RAPIDS.replace(" avx512_bf16", ""), True,
         "CPU 'Intel(R) Xeon(R) Platinum 8480+' has AMX instructions"),
        (EPYC_ZEN3.replace(" fma", " fma avx512f avx512_bf16"), True,
         "CPU 'AMD EPYC 7B13 64-Core Processor' has AVX512-BF16 instructions"),
    ],
)
def test_cpu_bfloat16_needs_avx512_bf16_or_amx(cpuinfo, text, native, reason):
    cpuinfo(text)
    assert hardware.bfloat16_support("cpu") == (native, reason)
    assert hardware.bfloat16_support(torch.device("cpu")).native is native


def test_arm_bf16_counts_as_native(cpuinfo):
    cpuinfo(GRAVITON3)
    assert hardware.bfloat16_support("cpu").native


@pytest.fixture
def gpu(monkeypatch):
    """A mocked CUDA device: its name, compute capability and `is_bf16_supported`'s answer."""
    calls = []

    def set_gpu(name: str, capability, supported: bool) -> None:
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())

        def is_bf16_supported(**kwargs):
            calls.append(kwargs)
            return supported

        monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)

    set_gpu.calls = calls
    return set_gpu


def test_cuda_bfloat16_is_pytorchs_answer_without_emulation(gpu):
    gpu("NVIDIA A100-SXM4-40GB", (8, 0), True)
    assert hardware.bfloat16_support("cuda:0") == (
        True, "GPU 'NVIDIA A100-SXM4-40GB' has native bfloat16"
    )
    gpu("Tesla V100-SXM2-16GB", (7, 0), False)
    support = hardware.bfloat16_support(torch.device("cuda", 0))
    assert not support.native
    assert support.reason == (
        "GPU 'Tesla V100-SXM2-16GB' (compute capability 7.0) has no native bfloat16 (Ampere, 8.0, "
        "and newer have it)"
    )
    # Emulation (which PyTorch 2.3+ counts by default) is not native.
    assert gpu.calls == [{"including_emulation": False}] * 2


def test_other_device_types_are_not_known_to_be_native():
    support = hardware.bfloat16_support("meta")
    assert not support.native
    assert "'meta'" in support.reason


def test_describe_cpu_names_the_model_and_its_vector_extensions(cpuinfo, monkeypatch):
    monkeypatch.setattr(hardware.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    cpuinfo(EPYC_ZEN3)
    assert hardware.describe_cpu() == (
        "AMD EPYC 7B13 64-Core Processor (x86_64: AVX2; no AVX512F, AVX512_BF16, AMX; "
        "PyTorch kernels AVX2)"
    )
    cpuinfo(SAPPHIRE_RAPIDS)
    assert hardware.describe_cpu().startswith(
        "Intel(R) Xeon(R) Platinum 8480+ (x86_64: AVX2 AVX512F AVX512_BF16 AMX; PyTorch kernels"
    )
    cpuinfo(EPYC_ZEN3.replace(" avx avx2", ""))
    assert "(x86_64: none of AVX2, AVX512F, AVX512_BF16, AMX;" in hardware.describe_cpu()
    monkeypatch.setattr(hardware.platform, "machine", lambda: "aarch64")
    cpuinfo(GRAVITON3)
    assert "(aarch64: NEON SVE BF16; PyTorch kernels" in hardware.describe_cpu()


def test_this_machine():
    # Whatever it is, the answer is consistent with the flags and names the CPU.
    support = hardware.bfloat16_support("cpu")
    flags = hardware.cpu_flags()
    if flags is not None:
        assert support.native == bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    assert hardware.cpu_model_name() in support.reason
    assert hardware.describe_cpu().startswith(hardware.cpu_model_name())
