#pragma once
// The AVX-512 side of the attention kernel (attention_avx512.cpp): the AVX2
// kernel's plan and results (attention_avx2.hpp), its products and softmax
// on 16 lanes. Plain data and function pointers only: see cpu_features.hpp.
#include "targets/cpu/kernels/attention/attention_avx2.hpp"

namespace kiln::avx512 {

using avx2::attention_plan;

std::size_t attention_scratch_bytes(const attention_plan& p);
void run_attention(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask,
                   float* out, std::byte* scratch);

}  // namespace kiln::avx512
