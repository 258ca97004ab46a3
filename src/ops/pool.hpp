#pragma once
// Average and max pooling over 1 to 3 spatial dimensions (ONNX semantics).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

enum class pooling_mode { average, max };
inline std::span<const char* const> enum_names(pooling_mode) {
    static constexpr const char* names[] = {"average", "max"};
    return names;
}

// x [N, C, spatial...] -> [N, C, out...]. Max ignores padded positions;
// average divides by the count of input elements in the window, or with
// count_include_pad by the window size clipped to the padded input.
// `global` pools each whole spatial extent to one value. `channels_last`
// stores a 4-D result as [N, H, W, C] in memory (same lens, permuted
// strides): set by the cpu target where the input is channels-last too.
struct pooling : op_base {
    pooling_mode mode = pooling_mode::average;
    std::vector<std::int64_t> lengths;
    std::vector<std::int64_t> stride;
    std::vector<std::int64_t> padding;
    std::vector<std::int64_t> dilation;
    bool ceil_mode = false;
    bool count_include_pad = false;
    bool global = false;
    bool channels_last = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.mode, "mode");
        f(self.lengths, "lengths");
        f(self.stride, "stride");
        f(self.padding, "padding");
        f(self.dilation, "dilation");
        f(self.ceil_mode, "ceil_mode");
        f(self.count_include_pad, "count_include_pad");
        f(self.global, "global");
        f(self.channels_last, "channels_last");
    }
    std::string name() const { return "pooling"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
