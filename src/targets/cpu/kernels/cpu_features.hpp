#pragma once
#include <string>

// The one convention for ISA-specific code in the cpu target: loops compiled
// for AVX2 + FMA live in translation units named *_avx2.cpp (built with
// -mavx2 -mfma, see CMakeLists.txt), next to the portable kernel that calls
// them, behind a header *_avx2.hpp of their own. Only plain data and function
// pointers cross that boundary, and the AVX2 translation units include no
// header that portable code also instantiates, so the linker can never pick
// an AVX2-compiled inline function for code that runs on a CPU without AVX2.
// Callers check avx2::supported() first.
namespace kiln::avx2 {

// AVX2 and FMA on the CPU running us (cpu_features.cpp).
bool supported();
// F16C on the CPU running us (every AVX2 CPU made has it; checked anyway).
bool f16c_supported();

}  // namespace kiln::avx2

// The same convention for AVX-512: translation units named *_avx512.cpp are
// built with -mavx512f -mfma, behind a header of their own; callers check
// avx512::supported() first.
namespace kiln::avx512 {

// AVX-512 Foundation on the CPU running us, with the OS saving its registers.
bool supported();

// supported(), unless the environment variable KILN_CPU_ISA is "avx2": then
// the kernels that have both run their AVX2 loops (for A/B timings and for
// tests of both paths on one machine). Read at every call, so that a
// process can compile a program each way; any value other than "avx2" or
// "avx512" is an error that names it.
bool enabled();

// enabled(), and the CPU has AVX-512 BW and VBMI (byte masks and permutes):
// the *_avx512vbmi.cpp units.
bool vbmi_enabled();

}  // namespace kiln::avx512

namespace kiln {

// The CPU model name and the ISA extensions the kernels use ("... | avx avx2
// fma"): tuning results measured on one identity do not hold on another.
std::string cpu_identity();

// Bfloat16 dot products (AVX-512 BF16; oneDNN runs them on AMX where the CPU
// has it).
bool bf16_dot_supported();

}  // namespace kiln
