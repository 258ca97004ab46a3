#include "ops/fused_concat_pointwise.hpp"

#include "ops/op_helpers.hpp"
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

std::vector<shape> fused_concat_pointwise::program_inputs(const std::vector<shape>& inputs) const {
    if (pieces < 1 || static_cast<std::size_t>(pieces) > inputs.size())
        fail(name() + ": pieces=" + std::to_string(pieces) + " but the op has " + std::to_string(inputs.size()) +
             " inputs");
    const auto n = static_cast<std::size_t>(pieces);
    std::vector<shape> piece_shapes(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<shape> result{concat_of(axis).compute_shape(piece_shapes)};
    result.insert(result.end(), inputs.begin() + static_cast<std::ptrdiff_t>(n), inputs.end());
    return result;
}

shape fused_concat_pointwise::compute_shape(const std::vector<shape>& inputs) const {
    const shape out = program_of(steps).compute_shape(program_inputs(inputs));
    const shape joined = program_inputs(inputs).front();
    if (out.lens() != joined.lens())
        fail(name() + ": the program's result " + to_string(out) + " is not the concatenation's shape " +
             to_string(joined));
    return out;
}

void fused_concat_pointwise::compute(const argument& result, const std::vector<argument>& inputs) const {
    std::vector<shape> shapes;
    for (const auto& in : inputs) shapes.push_back(in.get_shape());
    const auto n = static_cast<std::size_t>(pieces);
    argument joined(program_inputs(shapes).front());
    concat_of(axis).compute(joined,
                            std::vector<argument>(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(n)));
    std::vector<argument> program_args{joined};
    program_args.insert(program_args.end(), inputs.begin() + static_cast<std::ptrdiff_t>(n), inputs.end());
    program_of(steps).compute(result, program_args);
}

}  // namespace kiln::op
