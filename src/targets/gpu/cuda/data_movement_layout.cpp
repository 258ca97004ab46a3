#include "targets/gpu/cuda/data_movement_layout.hpp"

#include <algorithm>

namespace kiln::data_movement {

bool movable_dtype(dtype t) {
    switch (t) {
    case dtype::fp4e2m1_type:
    case dtype::int4_type:
    case dtype::uint4_type:
    case dtype::int2_type:
    case dtype::uint2_type: return false;
    default: break;
    }
    const std::size_t size = dtype_size(t);
    return size == 1 || size == 2 || size == 4 || size == 8;
}

bool walkable(const shape& s) { return !s.is_tuple() && s.ndim() <= static_cast<std::size_t>(max_rank); }

copy_walk simplified_copy(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& src_strides,
                          const std::vector<std::size_t>& dst_strides) {
    copy_walk w;
    for (std::size_t d = 0; d < lens.size(); ++d) {
        if (lens[d] == 1) continue;  // never moves an address
        const int last = w.rank - 1;
        // The previous (outer) dim steps exactly over this one in both tensors: one dim.
        if (last >= 0 && w.src_strides[last] == src_strides[d] * lens[d] &&
            w.dst_strides[last] == dst_strides[d] * lens[d]) {
            w.lens[last] *= lens[d];
            w.src_strides[last] = src_strides[d];
            w.dst_strides[last] = dst_strides[d];
            continue;
        }
        w.lens[w.rank] = lens[d];
        w.src_strides[w.rank] = src_strides[d];
        w.dst_strides[w.rank] = dst_strides[d];
        ++w.rank;
    }
    return w;
}

std::size_t widen_copy(copy_walk& w, std::size_t element_bytes, const void* dst, const void* src) {
    const int inner = w.rank - 1;
    if (inner < 0 || w.src_strides[inner] != 1 || w.dst_strides[inner] != 1) return element_bytes;
    const auto dst_address = reinterpret_cast<std::uintptr_t>(dst);
    const auto src_address = reinterpret_cast<std::uintptr_t>(src);
    for (std::size_t unit = 16; unit > element_bytes; unit /= 2) {
        const std::size_t k = unit / element_bytes;
        bool fits = w.lens[inner] % k == 0 && dst_address % unit == 0 && src_address % unit == 0;
        for (int d = 0; fits && d < inner; ++d) fits = w.src_strides[d] % k == 0 && w.dst_strides[d] % k == 0;
        if (!fits) continue;
        w.lens[inner] /= k;
        for (int d = 0; d < inner; ++d) {
            w.src_strides[d] /= k;
            w.dst_strides[d] /= k;
        }
        return unit;
    }
    return element_bytes;
}

strided_walk walk_of(const shape& s, std::size_t begin, std::size_t end, bool merge) {
    strided_walk w;
    for (std::size_t d = begin; d < end; ++d) {
        const std::size_t len = s.lens()[d];
        const std::size_t stride = s.strides()[d];
        if (merge) {
            if (len == 1) continue;
            const int last = w.rank - 1;
            if (last >= 0 && w.strides[last] == stride * len) {
                w.lens[last] *= len;
                w.strides[last] = stride;
                continue;
            }
        }
        w.lens[w.rank] = len;
        w.strides[w.rank] = stride;
        ++w.rank;
    }
    return w;
}

std::uint64_t span(const std::uint64_t* lens, const std::uint64_t* strides, int rank) {
    std::uint64_t last = 0;
    for (int d = 0; d < rank; ++d) {
        if (lens[d] == 0) return 0;
        last += (lens[d] - 1) * strides[d];
    }
    return last + 1;
}

std::uint64_t span(const shape& s) {
    std::uint64_t last = 0;
    for (std::size_t d = 0; d < s.ndim(); ++d) {
        if (s.lens()[d] == 0) return 0;
        last += (s.lens()[d] - 1) * s.strides()[d];
    }
    return last + 1;
}

bool needs_wide_index(std::initializer_list<std::uint64_t> sizes) {
    constexpr std::uint64_t limit = std::uint64_t{1} << 31;
    return std::any_of(sizes.begin(), sizes.end(), [](std::uint64_t n) { return n >= limit; });
}

}  // namespace kiln::data_movement
