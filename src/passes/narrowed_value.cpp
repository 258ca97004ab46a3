// See narrowed_value.hpp.
#include "passes/narrowed_value.hpp"

#include <algorithm>

#include "ops/index.hpp"
#include "ops/op_helpers.hpp"
#include "passes/repeated_constants.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

// A broadcast of a constant narrowed along those of `dims` it spreads
// its input over (a dim of 1, or one numpy's alignment adds) and along
// those its input narrows along: a token-type index of zeros broadcast
// to [batch, seq]. Standard, or nullopt where it narrows along none.
std::optional<argument> narrowed_broadcast(const instruction& ins, const std::vector<std::size_t>& dims,
                                           const narrowing& how) {
    const instruction& in = *ins.inputs()[0];
    const std::size_t offset = ins.get_shape().ndim() - std::min(ins.get_shape().ndim(), in.get_shape().ndim());
    std::vector<std::size_t> input_dims;
    for (std::size_t d : dims)
        if (d >= offset && in.get_shape().lens()[d - offset] > 1) input_dims.push_back(d - offset);
    std::optional<argument> source = narrowed_value(in, input_dims, how);
    if (!source) source = how.whole_value(in);
    if (!source) return std::nullopt;
    std::vector<std::size_t> lens = ins.get_shape().lens();
    bool narrowed = false;
    for (std::size_t d : dims) {
        if (d < offset || source->get_shape().lens()[d - offset] == 1) {
            narrowed = narrowed || lens[d] > 1;
            lens[d] = 1;
        }
    }
    if (!narrowed) return std::nullopt;
    try {
        const operation spread = ins.get_operator().with_attributes(value_map{{"out_lens", lens_value(lens)}});
        const shape out = spread.compute_shape({source->get_shape()});
        return spread.evaluate(out, {*source}).contiguous();
    } catch (const error&) {
        return std::nullopt;
    }
}

}  // namespace

std::optional<argument> narrowed_value(const instruction& ins, const std::vector<std::size_t>& dims,
                                       const narrowing& how) {
    const shape& s = ins.get_shape();
    if (dims.empty() || s.is_tuple() || !how.is_constant(ins)) return std::nullopt;
    if (ins.is_literal()) {
        if (!ins.get_literal().holds_bytes()) return std::nullopt;
        return without_repeats(ins.get_literal().get_argument(), dims);
    }
    const operation& op = ins.get_operator();
    if (op.name() == "broadcast" && ins.inputs().size() == 1) return narrowed_broadcast(ins, dims, how);
    // Which of `dims` each input's dimension is, or none.
    std::vector<std::vector<std::size_t>> input_dims(ins.inputs().size());
    if (op.is_pointwise() && ins.module_inputs().empty()) {
        for (std::size_t k = 0; k < ins.inputs().size(); ++k) {
            const auto& lens = ins.inputs()[k]->get_shape().lens();
            for (std::size_t d : dims)
                if (d + lens.size() >= s.ndim() && lens[d + lens.size() - s.ndim()] > 1)
                    input_dims[k].push_back(d + lens.size() - s.ndim());
        }
    } else if (const auto* g = op.get_if<op::gather>(); g != nullptr && ins.inputs().size() == 2) {
        const std::size_t data_rank = ins.inputs()[0]->get_shape().ndim();
        const std::size_t index_rank = ins.inputs()[1]->get_shape().ndim();
        const std::size_t axis = ops::normalize_axis("gather", g->axis, data_rank);
        for (std::size_t d : dims) {
            if (d >= axis && d < axis + index_rank)
                input_dims[1].push_back(d - axis);
            else
                input_dims[0].push_back(d < axis ? d : d - index_rank + 1);
        }
    } else {
        return std::nullopt;
    }
    std::vector<argument> args;
    std::vector<shape> arg_shapes;
    bool narrowed = false;
    for (std::size_t k = 0; k < ins.inputs().size(); ++k) {
        const instruction& in = *ins.inputs()[k];
        std::optional<argument> v = narrowed_value(in, input_dims[k], how);
        narrowed = narrowed || v.has_value();
        if (!v) v = how.whole_value(in);
        if (!v) return std::nullopt;
        arg_shapes.push_back(v->get_shape());
        args.push_back(std::move(*v));
    }
    if (!narrowed) return std::nullopt;
    try {
        const shape out = op.compute_shape(arg_shapes);
        if (out.ndim() != s.ndim() || out.type() != s.type() || out.bytes() > how.max_bytes) return std::nullopt;
        return op.evaluate(out, args);
    } catch (const error&) {
        return std::nullopt;
    }
}

}  // namespace kiln
