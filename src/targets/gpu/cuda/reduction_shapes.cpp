#include "targets/gpu/cuda/reduction_shapes.hpp"

namespace kiln::cuda_reduce {

std::optional<element_type> element_type_of(dtype t) {
    switch (t) {
        case dtype::float_type: return element_type::f32;
        case dtype::half_type: return element_type::f16;
        case dtype::bf16_type: return element_type::bf16;
        case dtype::double_type: return element_type::f64;
        case dtype::int8_type: return element_type::i8;
        case dtype::int16_type: return element_type::i16;
        case dtype::int32_type: return element_type::i32;
        case dtype::int64_type: return element_type::i64;
        case dtype::uint8_type: return element_type::u8;
        case dtype::uint16_type: return element_type::u16;
        case dtype::uint32_type: return element_type::u32;
        case dtype::uint64_type: return element_type::u64;
        default: return std::nullopt;
    }
}

strided_dims make_dims(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides) {
    // Dims of length 1 are dropped and a dim whose stride is the next inner
    // dim's extent in memory is merged into it: every linear index keeps its
    // offset, and the device divides once per remaining dim.
    std::vector<std::size_t> kept_lens, kept_strides;
    for (std::size_t k = 0; k < lens.size(); ++k) {
        if (lens[k] == 1) continue;
        if (!kept_lens.empty() && kept_strides.back() == strides[k] * lens[k]) {
            kept_lens.back() *= lens[k];
            kept_strides.back() = strides[k];
        } else {
            kept_lens.push_back(lens[k]);
            kept_strides.push_back(strides[k]);
        }
    }
    strided_dims d;
    d.rank = static_cast<int>(kept_lens.size());
    for (std::size_t k = 0; k < kept_lens.size(); ++k) {
        d.lens[k] = kept_lens[k];
        d.strides[k] = kept_strides[k];
    }
    return d;
}

std::vector<std::size_t> without(const std::vector<std::size_t>& v, std::size_t skip) {
    std::vector<std::size_t> rest;
    for (std::size_t k = 0; k < v.size(); ++k)
        if (k != skip) rest.push_back(v[k]);
    return rest;
}

bool fits_walks(const std::vector<shape>& shapes, std::size_t extra_rank) {
    for (const auto& s : shapes)
        if (s.dynamic() || s.is_tuple() || s.ndim() + extra_rank > static_cast<std::size_t>(max_rank)) return false;
    return true;
}

}  // namespace kiln::cuda_reduce
