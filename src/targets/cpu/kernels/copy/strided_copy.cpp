#include "targets/cpu/kernels/copy/strided_copy.hpp"

#include <algorithm>
#include <cstring>

#include "kiln/errors.hpp"

namespace kiln {

strided_copy::strided_copy(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides,
                           std::size_t element_size)
    : element_size_(element_size) {
    // Merge from the innermost dimension outwards.
    for (std::size_t d = lens.size(); d-- > 0;) {
        const std::size_t len = lens[d], stride = strides[d];
        elements_ *= len;
        if (len == 1) continue;
        if (!lens_.empty() && stride == strides_.back() * lens_.back()) {
            lens_.back() *= len;
            continue;
        }
        lens_.push_back(len);
        strides_.push_back(stride);
    }
    if (lens_.empty()) {
        lens_.push_back(1);
        strides_.push_back(0);
    }
    if (lens_.size() > 16) fail(error_kind::runtime, "strided copy: more than 16 dimensions after merging");
    std::reverse(lens_.begin(), lens_.end());
    std::reverse(strides_.begin(), strides_.end());
}

void strided_copy::copy_range(const std::byte* src, std::byte* dst, std::size_t first, std::size_t last) const {
    gather_range(src, dst + first * element_size_, first, last);
}

void strided_copy::gather_range(const std::byte* src, std::byte* out, std::size_t first, std::size_t last) const {
    switch (element_size_) {
        case 1:
            return copy_typed<1>(src, out, first, last);
        case 2:
            return copy_typed<2>(src, out, first, last);
        case 4:
            return copy_typed<4>(src, out, first, last);
        case 8:
            return copy_typed<8>(src, out, first, last);
        default:
            return copy_typed<0>(src, out, first, last);
    }
}

// Size 0: element_size_ bytes, not known at compile time.
template <std::size_t Size>
void strided_copy::copy_typed(const std::byte* src, std::byte* out, std::size_t first, std::size_t last) const {
    const std::size_t es = Size ? Size : element_size_;
    const std::size_t rank = lens_.size(), inner = rank - 1;
    std::size_t idx[16];
    std::size_t offset = 0, rest = first;
    for (std::size_t d = rank; d-- > 0;) {
        idx[d] = rest % lens_[d];
        rest /= lens_[d];
        offset += idx[d] * strides_[d];
    }
    const std::size_t stride = strides_[inner];
    for (std::size_t pos = first; pos < last;) {
        const std::size_t run = std::min(lens_[inner] - idx[inner], last - pos);
        const std::byte* in = src + offset * es;
        if (stride == 1) {
            std::memcpy(out, in, run * es);
        } else {
            for (std::size_t j = 0; j < run; ++j) std::memcpy(out + j * es, in + j * stride * es, es);
        }
        out += run * es;
        pos += run;
        idx[inner] += run;
        offset += run * stride;
        if (idx[inner] < lens_[inner]) continue;
        offset -= lens_[inner] * stride;
        idx[inner] = 0;
        for (std::size_t d = inner; d-- > 0;) {
            offset += strides_[d];
            if (++idx[d] < lens_[d]) break;
            offset -= lens_[d] * strides_[d];
            idx[d] = 0;
        }
    }
}

}  // namespace kiln
