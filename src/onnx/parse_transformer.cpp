// ONNX ops of transformer and state-space blocks beyond Attention, all
// compositions of existing IR ops: RMSNormalization (reductions in the stash
// type), RotaryEmbedding (gather of the caches, slices and concat), Swish,
// SwiGLU and CausalConvWithState (a depthwise convolution).
#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;
using dims_t = std::vector<std::int64_t>;

dtype type_of(instruction_ref x) { return x->get_shape().type(); }
const std::vector<std::size_t>& lens_of(instruction_ref x) { return x->get_shape().lens(); }
std::int64_t dim(instruction_ref x, std::size_t i) { return static_cast<std::int64_t>(lens_of(x)[i]); }

instruction_ref convert(const node_context& ctx, instruction_ref x, dtype t) {
    if (type_of(x) == t) return x;
    return ctx.add("convert", {x}, value_map{{"target_type", to_string(t)}});
}

// x / sqrt(mean(x^2 over axis..last) + epsilon) in the stash type, back in
// x's type, times scale.
args_t parse_rms_norm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto rank = static_cast<std::int64_t>(lens_of(args[0]).size());
    std::int64_t axis = ctx.get_int("axis", -1);
    if (axis < -rank || axis >= rank)
        ctx.fail(error_kind::invalid_argument,
                 "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    const dtype stash = to_dtype(static_cast<std::int32_t>(ctx.get_int("stash_type", 1)), "stash_type");
    if (stash != dtype::float_type && stash != dtype::double_type && stash != dtype::half_type &&
        stash != dtype::bf16_type)
        ctx.fail(error_kind::invalid_argument, "stash_type must be a floating-point type");
    dims_t axes;
    for (std::int64_t a = axis; a < rank; ++a) axes.push_back(a);
    auto x = convert(ctx, args[0], stash);
    auto mean_square =
        ctx.add("reduce_mean", {ctx.add("mul", {x, x})}, value_map{{"axes", int_list(axes)}, {"keepdims", true}});
    auto rms = ctx.add("sqrt", {ctx.add("add", {mean_square, ctx.add_scalar(stash, ctx.get_float("epsilon", 1e-5))})});
    auto normalized = convert(ctx, ctx.add("div", {x, rms}), type_of(args[0]));
    return {ctx.add("mul", {normalized, convert(ctx, args[1], type_of(args[0]))})};
}

instruction_ref slice_last(const node_context& ctx, instruction_ref x, std::int64_t start, std::int64_t end,
                           std::int64_t step = 1) {
    return ctx.add("slice", {x}, value_map{{"axes", int_list(dims_t{-1})},
                                           {"starts", int_list(dims_t{start})},
                                           {"ends", int_list(dims_t{end})},
                                           {"steps", int_list(dims_t{step})}});
}

instruction_ref unsqueeze(const node_context& ctx, instruction_ref x, std::int64_t axis) {
    return ctx.add("unsqueeze", {x}, value_map{{"axes", int_list(dims_t{axis})}});
}

instruction_ref concat_last(const node_context& ctx, instruction_ref a, instruction_ref b) {
    const auto axis = static_cast<std::int64_t>(lens_of(a).size()) - 1;
    return ctx.add("concat", {a, b}, value_map{{"axis", axis}});
}

// Rotates pairs (x1, x2) of the first rotary_embedding_dim features by the
// angle whose cosine and sine the caches hold for each token's position. A
// 4-D input stays [B, H, S, D]; a 3-D one is viewed as [B, S, H, D]. Either
// way the caches become [B, S, D'/2] and gain a unit head axis.
args_t parse_rotary_embedding(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 4);
    auto x = args[0];
    const auto& in_lens = lens_of(x);
    if (in_lens.size() != 3 && in_lens.size() != 4)
        ctx.fail(error_kind::invalid_argument, "input must be 3-D or 4-D, got " + to_string(in_lens));
    const bool packed = in_lens.size() == 3;
    if (packed) {
        const std::int64_t heads = ctx.get_int("num_heads", 0);
        if (heads <= 0 || dim(x, 2) % heads != 0)
            ctx.fail(error_kind::invalid_argument, "a 3-D input needs num_heads dividing its hidden size " +
                                                       std::to_string(dim(x, 2)));
        x = ctx.add("reshape", {x}, value_map{{"dims", int_list(dims_t{dim(x, 0), dim(x, 1), heads, -1})}});
    }
    const std::int64_t head_size = dim(x, 3);
    std::int64_t rotary = ctx.get_int("rotary_embedding_dim", 0);
    if (rotary == 0) rotary = head_size;
    if (rotary < 0 || rotary > head_size || rotary % 2 != 0)
        ctx.fail(error_kind::invalid_argument, "rotary_embedding_dim " + std::to_string(rotary) +
                                                   " must be even and at most the head size " +
                                                   std::to_string(head_size));
    auto cos = args[1];
    auto sin = args[2];
    if (ctx.has_input(args, 3)) {
        cos = ctx.add("gather", {cos, args[3]}, value_map{{"axis", std::int64_t{0}}});
        sin = ctx.add("gather", {sin, args[3]}, value_map{{"axis", std::int64_t{0}}});
    }
    if (lens_of(cos).size() != 3 || dim(cos, 2) != rotary / 2 || lens_of(sin) != lens_of(cos))
        ctx.fail(error_kind::invalid_argument, "cos and sin caches must give [batch, sequence, " +
                                                   std::to_string(rotary / 2) + "] values, got " +
                                                   to_string(lens_of(cos)) + " and " + to_string(lens_of(sin)));
    const std::int64_t head_axis = packed ? 2 : 1;
    cos = convert(ctx, unsqueeze(ctx, cos, head_axis), type_of(x));
    sin = convert(ctx, unsqueeze(ctx, sin, head_axis), type_of(x));

    const bool interleaved = ctx.get_int("interleaved", 0) != 0;
    auto rotated_part = slice_last(ctx, x, 0, rotary);
    auto x1 = interleaved ? slice_last(ctx, rotated_part, 0, rotary, 2) : slice_last(ctx, rotated_part, 0, rotary / 2);
    auto x2 = interleaved ? slice_last(ctx, rotated_part, 1, rotary, 2) : slice_last(ctx, rotated_part, rotary / 2, rotary);
    auto real = ctx.add("sub", {ctx.add("mul", {cos, x1}), ctx.add("mul", {sin, x2})});
    auto imag = ctx.add("add", {ctx.add("mul", {sin, x1}), ctx.add("mul", {cos, x2})});
    instruction_ref rotated;
    if (interleaved) {
        // Pairs back side by side: [..., D'/2, 2] -> [..., D'].
        auto pairs = concat_last(ctx, unsqueeze(ctx, real, -1), unsqueeze(ctx, imag, -1));
        auto lens = lens_of(rotated_part);
        rotated = ctx.add("reshape", {pairs}, value_map{{"dims", int_list(lens)}});
    } else {
        rotated = concat_last(ctx, real, imag);
    }
    if (rotary < head_size) rotated = concat_last(ctx, rotated, slice_last(ctx, x, rotary, head_size));
    if (packed) rotated = ctx.add("reshape", {rotated}, value_map{{"dims", int_list(in_lens)}});
    return {rotated};
}

// x * sigmoid(alpha * x).
instruction_ref swish(const node_context& ctx, instruction_ref x) {
    auto scaled = ctx.add("mul", {x, ctx.add_scalar(type_of(x), ctx.get_float("alpha", 1.0))});
    return ctx.add("mul", {x, ctx.add("sigmoid", {scaled})});
}

args_t parse_swish(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {swish(ctx, args[0])};
}

// Swish(gate) * value; the spec forbids broadcasting between the two.
args_t parse_swiglu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    if (type_of(args[0]) != type_of(args[1]) || lens_of(args[0]) != lens_of(args[1]))
        ctx.fail(error_kind::invalid_argument, "A and B must have the same shape and type, got " +
                                                   to_string(args[0]->get_shape()) + " and " +
                                                   to_string(args[1]->get_shape()));
    return {ctx.add("mul", {swish(ctx, args[0]), args[1]})};
}

// Depthwise causal 1-D convolution over [past_state (or zeros), input]; the
// last k - 1 steps of that sequence are the next call's state.
args_t parse_causal_conv_with_state(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 4);
    auto x = args[0];
    auto w = args[1];
    if (lens_of(x).size() != 3 || lens_of(w).size() != 3 || dim(w, 0) != dim(x, 1) || dim(w, 1) != 1)
        ctx.fail(error_kind::invalid_argument, "input must be [B, C, L] and weight [C, 1, k], got " +
                                                   to_string(lens_of(x)) + " and " + to_string(lens_of(w)));
    const std::string activation = ctx.get_string("activation", "none");
    if (activation != "none" && activation != "silu" && activation != "swish")
        ctx.fail(error_kind::invalid_argument, "activation must be none, silu or swish, got '" + activation + "'");
    const std::int64_t k = dim(w, 2);
    instruction_ref padded;
    if (ctx.has_input(args, 3)) {
        if (lens_of(args[3]) != std::vector<std::size_t>{lens_of(x)[0], lens_of(x)[1], std::size_t(k - 1)})
            ctx.fail(error_kind::invalid_argument, "past_state must be [B, C, k - 1], got " + to_string(lens_of(args[3])));
        padded = ctx.add("concat", {args[3], x}, value_map{{"axis", std::int64_t{2}}});
    } else {
        padded = ctx.add("pad", {x}, value_map{{"pads", int_list(dims_t{0, 0, k - 1, 0, 0, 0})}});
    }
    auto y = ctx.add("convolution", {padded, w}, value_map{{"group", dim(x, 1)}});
    if (ctx.has_input(args, 2))
        y = ctx.add("add", {y, ctx.add("reshape", {args[2]}, value_map{{"dims", int_list(dims_t{-1, 1})}})});
    if (activation != "none") {
        // SiLU in float32 at least, as the reference computes it for 16-bit inputs.
        const dtype t = type_of(y);
        const dtype wide = t == dtype::double_type ? t : dtype::float_type;
        auto yw = convert(ctx, y, wide);
        y = convert(ctx, ctx.add("mul", {yw, ctx.add("sigmoid", {yw})}), t);
    }
    const std::int64_t total = dim(padded, 2);
    auto state = ctx.add("slice", {padded}, value_map{{"axes", int_list(dims_t{2})},
                                                     {"starts", int_list(dims_t{total - (k - 1)})},
                                                     {"ends", int_list(dims_t{total})}});
    return {y, state};
}

}  // namespace

void add_transformer_parsers(parser_table& table) {
    table["RMSNormalization"] = parse_rms_norm;
    table["RotaryEmbedding"] = parse_rotary_embedding;
    table["Swish"] = parse_swish;
    table["SwiGLU"] = parse_swiglu;
    table["CausalConvWithState"] = parse_causal_conv_with_state;
}

}  // namespace kiln::onnx_import
