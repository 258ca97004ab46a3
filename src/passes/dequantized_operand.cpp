#include "passes/dequantized_operand.hpp"

#include "ops/op_helpers.hpp"
#include "ops/quant.hpp"
#include "passes/constant_value.hpp"
#include "passes/matcher.hpp"

namespace kiln {

dequantized read_dequantize(instruction_ref d) {
    const auto& in = d->inputs();
    dequantized r{in[0], in[1], std::nullopt, d->get_operator().get_if<op::dequantize_linear>()->axis};
    if (in.size() == 3) r.zero_point = in[2];
    return r;
}

bool is_zero(const std::optional<instruction_ref>& zero_point) {
    if (!zero_point) return true;
    auto v = constant_value(**zero_point);
    return v && ops::all_bytes_zero(*v);
}

bool is_quantized_weight(const dequantized& d, std::size_t axis, std::size_t channels) {
    if (d.q->get_shape().type() != dtype::int8_type || !match::is_constant_instruction(*d.q)) return false;
    if (d.scale->get_shape().type() != dtype::float_type || !match::is_constant_instruction(*d.scale)) return false;
    if (!d.per_tensor()) {
        if (d.scale->get_shape().ndim() != 1) return false;  // blocked scales
        const auto a =
            static_cast<std::size_t>(d.axis < 0 ? d.axis + static_cast<std::int64_t>(d.q->get_shape().ndim()) : d.axis);
        if (a != axis || d.scale->get_shape().elements() != channels) return false;
    }
    return is_zero(d.zero_point);
}

}  // namespace kiln
