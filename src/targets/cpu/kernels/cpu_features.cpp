// What the CPU running us supports, asked once.
#include "targets/cpu/kernels/cpu_features.hpp"

#include <cpuid.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "kiln/errors.hpp"

namespace kiln::avx2 {

bool supported() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
}

// Asked through cpuid: clang before 15 does not know "f16c" in
// __builtin_cpu_supports (the fuzz and sanitizer builds use clang 14).
bool f16c_supported() {
    static const bool yes = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    }();
    return yes;
}

}  // namespace kiln::avx2

namespace kiln::avx512 {

// (libgcc's answer also checks that the OS enabled the AVX-512 state in XCR0.)
bool supported() {
    static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    return yes;
}

bool enabled() {
    const char* forced = std::getenv("KILN_CPU_ISA");
    if (forced == nullptr || *forced == '\0') return supported();
    const std::string v = forced;
    if (v == "avx2") return false;
    if (v == "avx512") return supported();
    fail("KILN_CPU_ISA must be avx2 or avx512, got '" + v + "'");
}

bool vbmi_enabled() {
    static const bool has = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
    return has && enabled();
}

}  // namespace kiln::avx512

namespace kiln {

namespace {

std::string model_name() {
    std::ifstream info("/proc/cpuinfo");
    for (std::string line; std::getline(info, line);)
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
        }
    return "unknown cpu";
}

}  // namespace

std::string cpu_identity() {
    static const std::string identity = [] {
        std::string s = model_name();
        // The ISA extensions the kernels dispatch on: another set may run other
        // code. (__builtin_cpu_supports takes only literals.)
        s += " |";
        auto add = [&](bool has, const char* name) {
            if (has) s += std::string(" ") + name;
        };
        add(__builtin_cpu_supports("avx"), "avx");
        add(__builtin_cpu_supports("avx2"), "avx2");
        add(__builtin_cpu_supports("fma"), "fma");
        add(avx2::f16c_supported(), "f16c");
        add(__builtin_cpu_supports("avx512f"), "avx512f");
        add(__builtin_cpu_supports("avx512bw"), "avx512bw");
        add(__builtin_cpu_supports("avx512vbmi"), "avx512vbmi");
        add(__builtin_cpu_supports("avx512vnni"), "avx512vnni");
        add(bf16_dot_supported(), "avx512bf16");
        return s;
    }();
    return identity;
}

bool bf16_dot_supported() {
    static const bool yes = __builtin_cpu_supports("avx512bf16");
    return yes;
}

}  // namespace kiln
