#include "targets/cpu/kernels/quantize/code_map_kernel.hpp"

#include <algorithm>

#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/quantize/code_map_avx512vbmi.hpp"

namespace kiln {

namespace {

class code_map_kernel final : public wrapping_kernel {
public:
    code_map_kernel(std::shared_ptr<const cpu_kernel> inner, std::vector<std::uint8_t> map)
        : wrapping_kernel(std::move(inner)), map_(std::move(map)) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        inner_->run(result, inputs, scratch);
        auto* codes = result.data_as<std::uint8_t>();
        const std::size_t n = result.get_shape().elements();
        // Chunks small enough to share out, large enough to stream.
        constexpr std::size_t chunk = 16384;
        const auto chunks = static_cast<std::ptrdiff_t>((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
        for (std::ptrdiff_t k = 0; k < chunks; ++k) {
            const std::size_t begin = static_cast<std::size_t>(k) * chunk;
            avx512::map_codes(map_.data(), codes + begin, codes + begin, std::min(chunk, n - begin));
        }
    }
    std::size_t scratch_bytes() const override {
        return inner_->scratch_bytes();
    }

private:
    std::vector<std::uint8_t> map_;
};

}  // namespace

bool code_map_pays(const op::requantize_epilogue& e) {
    if (!e.ends_in_code_map() || !avx512::vbmi_enabled()) return false;
    return std::any_of(e.after_residual.kinds.begin(), e.after_residual.kinds.end(),
                       [](op::post_op_kind k) { return k != op::post_op_kind::relu && k != op::post_op_kind::clip; });
}

op::requantize_epilogue epilogue_up_to_rounding(const op::requantize_epilogue& e) {
    op::requantize_epilogue up_to = e;
    up_to.after_residual = {};
    up_to.output_type = e.round_type;
    up_to.output_scale = e.round_scale;
    up_to.output_zero_point = e.round_zero_point;
    up_to.round_type = dtype::float_type;
    up_to.round_scale = 1;
    up_to.round_zero_point = 0;
    return up_to;
}

std::shared_ptr<const cpu_kernel> with_code_map(std::shared_ptr<const cpu_kernel> inner,
                                                std::vector<std::uint8_t> map) {
    return std::make_shared<code_map_kernel>(std::move(inner), std::move(map));
}

}  // namespace kiln
