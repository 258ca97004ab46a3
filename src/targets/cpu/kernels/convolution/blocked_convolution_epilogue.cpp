#include "targets/cpu/kernels/convolution/blocked_convolution_epilogue.hpp"

#include <algorithm>
#include <vector>

#include "ops/blocked_layout.hpp"

namespace kiln::blocked_convolution {

bool reads_blocked_float(const op::fused_convolution& conv, const kernel_request& r, std::size_t block) {
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    // Constant weights, given as values or as a loaded file's packed form.
    return ops::is_blocked(conv.input_layout) && ops::channel_block(conv.input_layout) == block &&
           conv.output_layout == conv.input_layout && conv.conv.group == 1 && x.ndim() == 5 && w.ndim() == 4 &&
           x.type() == dtype::float_type && w.type() == dtype::float_type && x.standard() && r.is_constant(1) &&
           w.standard() && w.lens()[0] % block == 0 && w.lens()[1] == x.lens()[1] * block && r.output_shape.standard();
}

epilogue_operands operands_of(const epilogue& e, const std::vector<argument>& inputs) {
    const std::size_t first_operand = e.has_bias ? 3 : 2;
    return {e.has_bias ? inputs[2].data_as<float>() : nullptr,
            inputs.size() > first_operand ? inputs[first_operand].data_as<float>() : nullptr};
}

std::optional<epilogue> epilogue_of(const op::fused_convolution& conv, const kernel_request& r,
                                    std::size_t out_channels) {
    using kind = op::post_op_kind;
    const auto& kinds = conv.post.kinds;
    const bool plain_relu =
        std::all_of(conv.post.alpha.begin(), conv.post.alpha.end(), [](double a) { return a == 0; });
    epilogue e;
    e.has_bias = conv.has_bias;
    if (kinds.empty())
        e.then = finish::none;
    else if (kinds == std::vector<kind>{kind::relu} && plain_relu)
        e.then = finish::relu;
    else if (kinds == std::vector<kind>{kind::add})
        e.then = finish::add;
    else if (kinds == std::vector<kind>{kind::add, kind::relu} && plain_relu)
        e.then = finish::add_relu;
    else
        return std::nullopt;
    for (std::size_t i = conv.first_post_operand(); i < r.input_shapes.size(); ++i)
        if (r.input_shapes[i].lens() != r.output_shape.lens() || !r.input_shapes[i].standard()) return std::nullopt;
    if (conv.has_bias && (!r.input_shapes[2].standard() || r.input_shapes[2].elements() != out_channels))
        return std::nullopt;
    return e;
}

}  // namespace kiln::blocked_convolution
