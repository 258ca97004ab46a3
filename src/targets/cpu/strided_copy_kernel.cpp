// The cpu kernel for reshape and contiguous when they copy (a view cannot
// express the result): the input's elements in row-major order written out
// contiguously. Dimensions the input walks as one are merged first, so a
// transposed [B, H, S, D] view copies as runs of D elements.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "targets/cpu/cpu_kernels.hpp"

namespace kiln {

namespace {

// Work below this many bytes stays on one thread.
constexpr std::size_t parallel_bytes = std::size_t{1} << 20;

class strided_copy_kernel final : public cpu_kernel {
public:
    strided_copy_kernel(const shape& in, int threads) : element_size_(in.element_size()), threads_(threads) {
        // Merge from the innermost dimension outwards.
        for (std::size_t d = in.ndim(); d-- > 0;) {
            const std::size_t len = in.lens()[d], stride = in.strides()[d];
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
        std::reverse(lens_.begin(), lens_.end());
        std::reverse(strides_.begin(), strides_.end());
        elements_ = in.elements();
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const std::byte* src = inputs[0].data();
        std::byte* dst = result.data();
        const bool parallel = threads_ > 1 && elements_ * element_size_ >= parallel_bytes;
        if (!parallel) {
            copy_range(src, dst, 0, elements_);
            return;
        }
#pragma omp parallel num_threads(threads_)
        {
            const auto t = static_cast<std::size_t>(omp_get_thread_num());
            const auto nt = static_cast<std::size_t>(omp_get_num_threads());
            copy_range(src, dst, elements_ * t / nt, elements_ * (t + 1) / nt);
        }
    }

private:
    // Copies elements [first, last) of the input's row-major order.
    void copy_range(const std::byte* src, std::byte* dst, std::size_t first, std::size_t last) const {
        switch (element_size_) {
            case 1:
                return copy_typed<1>(src, dst, first, last);
            case 2:
                return copy_typed<2>(src, dst, first, last);
            case 4:
                return copy_typed<4>(src, dst, first, last);
            case 8:
                return copy_typed<8>(src, dst, first, last);
            default:
                return copy_typed<0>(src, dst, first, last);
        }
    }

    // Size 0: element_size_ bytes, not known at compile time.
    template <std::size_t Size>
    void copy_typed(const std::byte* src, std::byte* dst, std::size_t first, std::size_t last) const {
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
        std::byte* out = dst + first * es;
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

    std::vector<std::size_t> lens_, strides_;
    std::size_t elements_ = 0;
    std::size_t element_size_;
    int threads_;
};

}  // namespace

std::shared_ptr<const cpu_kernel> make_strided_copy_kernel(const kernel_request& r) {
    const shape& in = r.input_shapes.at(0);
    if (in.elements() != r.output_shape.elements() || !r.output_shape.standard() || in.ndim() > 16) return nullptr;
    if (in.type() != r.output_shape.type()) return nullptr;
    return std::make_shared<strided_copy_kernel>(in, r.threads > 0 ? r.threads : omp_get_max_threads());
}

}  // namespace kiln
