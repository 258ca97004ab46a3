#include "ops/fused_concat_pointwise.hpp"

#include <cstring>

#include "ops/fused_quantized_linalg.hpp"
#include "ops/op_helpers.hpp"
#include "ops/quant.hpp"
#include "ops/shape_ops.hpp"

namespace kiln::op {

namespace {

concat concat_of(std::int64_t axis) {
    concat c;
    c.axis = axis;
    return c;
}

fused_pointwise program_of(const std::vector<pointwise_step>& steps) {
    fused_pointwise p;
    p.steps = steps;
    return p;
}

}  // namespace

bool fused_concat_pointwise::coded_piece(const std::vector<shape>& inputs, std::size_t i) const {
    if (!is_8bit_integer(inputs[i].type())) return false;
    if (piece_scales.size() != static_cast<std::size_t>(pieces) ||
        piece_zero_points.size() != static_cast<std::size_t>(pieces))
        fail(name() + ": piece " + std::to_string(i) + " is " + to_string(inputs[i].type()) +
             " codes, which need piece_scales and piece_zero_points with one value per piece (" +
             std::to_string(pieces) + "), got " + std::to_string(piece_scales.size()) + " and " +
             std::to_string(piece_zero_points.size()));
    if (!(piece_scales[i] > 0))
        fail(name() + ": piece_scales[" + std::to_string(i) + "] must be positive, got " +
             std::to_string(piece_scales[i]));
    return true;
}

std::vector<shape> fused_concat_pointwise::program_inputs(const std::vector<shape>& inputs) const {
    if (pieces < 1 || static_cast<std::size_t>(pieces) > inputs.size())
        fail(name() + ": pieces=" + std::to_string(pieces) + " but the op has " + std::to_string(inputs.size()) +
             " inputs");
    const auto n = static_cast<std::size_t>(pieces);
    std::vector<shape> piece_shapes(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(n));
    for (std::size_t i = 0; i < n; ++i)
        if (coded_piece(inputs, i)) piece_shapes[i] = shape{dtype::float_type, inputs[i].lens()};
    std::vector<shape> result{concat_of(axis).compute_shape(piece_shapes)};
    result.insert(result.end(), inputs.begin() + static_cast<std::ptrdiff_t>(n), inputs.end());
    return result;
}

shape fused_concat_pointwise::compute_shape(const std::vector<shape>& inputs) const {
    const shape standard = standard_result(inputs);
    if (!channels_last) return standard;
    if (standard.ndim() != 4 || (axis != 1 && axis != -3))
        fail(name() + ": channels_last needs a 4-D result concatenated along axis 1, got axis " + std::to_string(axis) +
             " of " + to_string(standard.lens()));
    return shape{standard.type(), standard.lens(), channels_last_strides(standard.lens())};
}

shape fused_concat_pointwise::standard_result(const std::vector<shape>& inputs) const {
    const shape out = program_of(steps).compute_shape(program_inputs(inputs));
    const shape joined = program_inputs(inputs).front();
    if (out.lens() != joined.lens())
        fail(name() + ": the program's result " + to_string(out) + " is not the concatenation's shape " +
             to_string(joined));
    if (!quantized()) return out;
    if (out.type() != dtype::float_type || !is_8bit_integer(output_type))
        fail(name() + ": output_type " + to_string(output_type) + " needs a float32 program and int8 or uint8, got a " +
             to_string(out.type()) + " program");
    if (!(output_scale > 0)) fail(name() + ": output_scale must be positive, got " + std::to_string(output_scale));
    return shape{output_type, out.lens()};
}

void fused_concat_pointwise::compute(const argument& result, const std::vector<argument>& inputs) const {
    if (!result.get_shape().standard()) {
        // Computed in standard layout, then copied to the result's strides.
        argument standard(result.get_shape().as_standard());
        compute(standard, inputs);
        const shape& s = result.get_shape();
        const std::size_t bytes = s.element_size();
        for (std::size_t i = 0; i < s.elements(); ++i)
            std::memcpy(result.data() + s.index(i) * bytes, standard.data() + i * bytes, bytes);
        return;
    }
    std::vector<shape> shapes;
    for (const auto& in : inputs) shapes.push_back(in.get_shape());
    const auto n = static_cast<std::size_t>(pieces);
    argument joined(program_inputs(shapes).front());
    std::vector<argument> piece_values(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(n));
    for (std::size_t i = 0; i < n; ++i) {
        if (!coded_piece(shapes, i)) continue;
        // dequantize_linear's own compute, per tensor.
        const dtype t = shapes[i].type();
        argument zero_point(shape{t, {1}}), scale(shape{dtype::float_type, {1}});
        if (t == dtype::uint8_type)
            zero_point.data_as<std::uint8_t>()[0] = static_cast<std::uint8_t>(piece_zero_points[i]);
        else
            zero_point.data_as<std::int8_t>()[0] = static_cast<std::int8_t>(piece_zero_points[i]);
        scale.data_as<float>()[0] = static_cast<float>(piece_scales[i]);
        argument real(shape{dtype::float_type, shapes[i].lens()});
        dequantize_linear{}.compute(real, {inputs[i], scale, zero_point});
        piece_values[i] = real;
    }
    concat_of(axis).compute(joined, piece_values);
    std::vector<argument> program_args{joined};
    program_args.insert(program_args.end(), inputs.begin() + static_cast<std::ptrdiff_t>(n), inputs.end());
    if (!quantized()) {
        program_of(steps).compute(result, program_args);
        return;
    }
    argument real(shape{dtype::float_type, result.get_shape().lens()});
    program_of(steps).compute(real, program_args);
    // quantize_linear's arithmetic: the quotient in float32.
    const auto scale = static_cast<float>(output_scale);
    const auto zero = static_cast<double>(output_zero_point);
    const double lo = output_type == dtype::uint8_type ? 0 : -128, hi = output_type == dtype::uint8_type ? 255 : 127;
    const float* x = real.data_as<const float>();
    const std::size_t count = result.get_shape().elements();
    for (std::size_t i = 0; i < count; ++i) {
        const double code = saturated_code(static_cast<double>(x[i] / scale), zero, lo, hi);
        if (output_type == dtype::uint8_type)
            result.data_as<std::uint8_t>()[i] = static_cast<std::uint8_t>(code);
        else
            result.data_as<std::int8_t>()[i] = static_cast<std::int8_t>(code);
    }
}

}  // namespace kiln::op
