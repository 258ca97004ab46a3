"""The bench's machine line names the CPU extensions that change which kernels run (VNNI, BF16, AMX), read from
/proc/cpuinfo's flags: a virtual machine that moved to a host without bfloat16 dot products made Kiln bf16
3x slower between two runs with nothing in the reports to say why."""
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import run_bench  # noqa: E402


def _cpuinfo(flags):
    return f"processor\t: 0\nmodel name\t: Test Xeon\nflags\t\t: {flags}\n"


@pytest.mark.parametrize("flags, isa", [
    ("fpu avx2 fma avx512f avx512_vnni", "AVX-512 + VNNI"),
    ("fpu avx2 fma avx512f avx512_vnni avx512_bf16 amx_tile amx_bf16", "AVX-512 + VNNI + BF16 + AMX"),
    ("fpu avx2 fma avx_vnni", "AVX2+FMA + AVX-VNNI"),
    ("fpu sse4_2", "no AVX2"),
])
def test_isa_names_the_kernel_changing_extensions(monkeypatch, flags, isa):
    real = pathlib.Path

    class FakePath(type(real())):
        def read_text(self, *args, **kwargs):
            if str(self) == "/proc/cpuinfo":
                return _cpuinfo(flags)
            return real.read_text(self, *args, **kwargs)

    monkeypatch.setattr(run_bench, "Path", FakePath)
    info = run_bench.machine_info()
    assert info["isa"] == isa
    assert info["cpu"] == "Test Xeon"
