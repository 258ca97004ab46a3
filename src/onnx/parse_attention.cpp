// ONNX Attention (opsets 23-25) composed from existing IR ops: the heads are
// split with reshape / transpose, scores come from dot, and every kind of
// masking (attn_mask, is_causal, sliding windows, nonpad_kv_seqlen) becomes
// one additive bias of 0 / -inf. Grouped-query attention folds the query
// heads that share a KV head into the row dimension of one dot, so K and V
// are never repeated in memory.
#include <algorithm>
#include <cmath>
#include <limits>

#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;
using dims_t = std::vector<std::int64_t>;

constexpr double neg_inf = -std::numeric_limits<double>::infinity();

dtype type_of(instruction_ref x) { return x->get_shape().type(); }
const std::vector<std::size_t>& lens_of(instruction_ref x) { return x->get_shape().lens(); }
// Checked: a malformed model may give an input of too low a rank.
std::int64_t dim(instruction_ref x, std::size_t i) {
    const auto& lens = lens_of(x);
    if (i >= lens.size())
        fail(error_kind::invalid_argument, "an input of shape " + to_string(lens) + " has no dimension " + std::to_string(i));
    return static_cast<std::int64_t>(lens[i]);
}

instruction_ref reshape(const node_context& ctx, instruction_ref x, const dims_t& dims) {
    return ctx.add("reshape", {x}, value_map{{"dims", int_list(dims)}});
}
instruction_ref transpose(const node_context& ctx, instruction_ref x, const dims_t& perm) {
    return ctx.add("transpose", {x}, value_map{{"permutation", int_list(perm)}});
}
instruction_ref convert(const node_context& ctx, instruction_ref x, dtype t) {
    if (type_of(x) == t) return x;
    return ctx.add("convert", {x}, value_map{{"target_type", to_string(t)}});
}

// [B, S, H * D] -> [B, H, S, D].
instruction_ref split_heads(const node_context& ctx, instruction_ref x, std::int64_t heads, const char* what) {
    if (heads <= 0 || dim(x, 2) % heads != 0)
        ctx.fail(error_kind::invalid_argument, std::string(what) + " hidden size " + std::to_string(dim(x, 2)) +
                                                   " is not a multiple of its head count " + std::to_string(heads));
    return transpose(ctx, reshape(ctx, x, {dim(x, 0), dim(x, 1), heads, -1}), {0, 2, 1, 3});
}

// Q, K, V as [B, heads, S, head size], whatever rank they came in.
struct heads_layout {
    instruction_ref q, k, v;
    bool packed = false;  // 3-D inputs, so Y goes back to [B, S, H * Dv]
};

heads_layout to_4d(const node_context& ctx, const args_t& args) {
    const std::size_t rank = lens_of(args[0]).size();
    if (rank != 3 && rank != 4)
        ctx.fail(error_kind::invalid_argument, "Q must be 3-D or 4-D, got " + to_string(lens_of(args[0])));
    for (std::size_t i = 1; i < 3; ++i)
        if (lens_of(args[i]).size() != rank)
            ctx.fail(error_kind::invalid_argument, "Q, K and V must have the same rank");
    if (rank == 4) return {args[0], args[1], args[2], false};
    const std::int64_t q_heads = ctx.get_int("q_num_heads", 0);
    const std::int64_t kv_heads = ctx.get_int("kv_num_heads", 0);
    return {split_heads(ctx, args[0], q_heads, "Q"), split_heads(ctx, args[1], kv_heads, "K"),
            split_heads(ctx, args[2], kv_heads, "V"), true};
}

void check_shapes(const node_context& ctx, instruction_ref q, instruction_ref k, instruction_ref v) {
    auto fail = [&](const std::string& what) {
        ctx.fail(error_kind::invalid_argument, what + " (Q " + to_string(lens_of(q)) + ", K " + to_string(lens_of(k)) +
                                                   ", V " + to_string(lens_of(v)) + " as [B, heads, S, D])");
    };
    if (dim(k, 0) != dim(q, 0) || dim(v, 0) != dim(q, 0)) fail("Q, K and V must have the same batch size");
    if (dim(k, 1) != dim(v, 1)) fail("K and V must have the same number of heads");
    if (dim(q, 1) % dim(k, 1) != 0) fail("the query head count must be a multiple of the key/value head count");
    if (dim(k, 3) != dim(q, 3)) fail("Q and K must have the same head size");
    if (dim(k, 2) != dim(v, 2)) fail("K and V must have the same sequence length");
}

// An int64 literal 0, 1, ..., n - 1 with shape `lens`.
instruction_ref iota(const node_context& ctx, std::size_t n, std::vector<std::size_t> lens) {
    std::vector<std::int64_t> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<std::int64_t>(i);
    return ctx.add_literal(literal(shape{dtype::int64_type, std::move(lens)}, values));
}

instruction_ref both(const node_context& ctx, instruction_ref a, instruction_ref b) {
    return a == ctx.mod().end() ? b : ctx.add("and", {a, b});
}

// Which keys each query may see by position: the causal frontier, the sliding
// window and the padding of an external cache. Query i sits at absolute
// position i + offset, where offset counts the valid keys before the query
// block (per batch, [B, 1, 1, 1], when it comes from nonpad_kv_seqlen).
// Returns the module's end() when no position is excluded.
instruction_ref position_allowed(const node_context& ctx, const args_t& args, std::int64_t q_len, std::int64_t kv_len,
                                 std::int64_t past_len) {
    const bool causal = ctx.get_int("is_causal", 0) != 0;
    const std::int64_t left = ctx.get_int("left_window_size", -1);
    const std::int64_t right = ctx.get_int("right_window_size", -1);
    if (left < -1 || right < -1)
        ctx.fail(error_kind::invalid_argument, "left_window_size and right_window_size must be -1 or non-negative");
    const bool nonpad = ctx.has_input(args, 6);
    instruction_ref allowed = ctx.mod().end();
    auto keys = iota(ctx, static_cast<std::size_t>(kv_len), {static_cast<std::size_t>(kv_len)});
    instruction_ref offset = ctx.add_scalar(dtype::int64_type, static_cast<double>(past_len));
    if (nonpad) {
        auto valid = reshape(ctx, convert(ctx, args[6], dtype::int64_type), {-1, 1, 1, 1});
        if (dim(valid, 0) != dim(args[0], 0))
            ctx.fail(error_kind::invalid_argument, "nonpad_kv_seqlen must hold one length per batch");
        allowed = ctx.add("less", {keys, valid});
        if (past_len == 0) offset = ctx.add("sub", {valid, ctx.add_scalar(dtype::int64_type, double(q_len))});
    }
    if (!causal && left < 0 && right < 0) return allowed;
    auto queries = iota(ctx, static_cast<std::size_t>(q_len), {static_cast<std::size_t>(q_len), 1});
    // distance[..., i, j] = (i + offset) - j: how far key j lies behind query i.
    auto distance = ctx.add("sub", {ctx.add("add", {queries, offset}), keys});
    auto bound = [&](std::int64_t v) { return ctx.add_scalar(dtype::int64_type, static_cast<double>(v)); };
    if (causal) allowed = both(ctx, allowed, ctx.add("greater", {distance, bound(-1)}));
    if (left >= 0) allowed = both(ctx, allowed, ctx.add("less", {distance, bound(left + 1)}));
    if (right >= 0) allowed = both(ctx, allowed, ctx.add("greater", {distance, bound(-right - 1)}));
    return allowed;
}

// attn_mask as an additive bias in dtype t; a mask shorter than the keys is
// padded with "not attended".
instruction_ref mask_bias(const node_context& ctx, instruction_ref mask, std::int64_t kv_len, dtype t) {
    const auto& lens = lens_of(mask);
    if (lens.empty()) ctx.fail(error_kind::invalid_argument, "attn_mask must have rank 1 or more");
    const auto last = static_cast<std::int64_t>(lens.back());
    if (last > kv_len)
        ctx.fail(error_kind::invalid_argument, "attn_mask covers " + std::to_string(last) + " keys but there are only " +
                                                   std::to_string(kv_len));
    const bool boolean = type_of(mask) == dtype::bool_type;
    if (last < kv_len) {
        dims_t pads(2 * lens.size(), 0);
        pads.back() = kv_len - last;
        mask = ctx.add("pad", {mask}, value_map{{"pads", int_list(pads)}, {"value", boolean ? 0.0 : neg_inf}});
    }
    if (!boolean) return convert(ctx, mask, t);
    return ctx.add("where", {mask, ctx.add_scalar(t, 0.0), ctx.add_scalar(t, neg_inf)});
}

instruction_ref sum_or(const node_context& ctx, instruction_ref a, instruction_ref b) {
    if (a == ctx.mod().end()) return b;
    if (b == ctx.mod().end()) return a;
    return ctx.add("add", {a, b});
}

// The whole additive bias, or end() when nothing is masked.
instruction_ref attention_bias(const node_context& ctx, const args_t& args, std::int64_t q_len, std::int64_t kv_len,
                               std::int64_t past_len, dtype t) {
    instruction_ref bias = ctx.mod().end();
    if (ctx.has_input(args, 3)) bias = mask_bias(ctx, args[3], kv_len, t);
    auto allowed = position_allowed(ctx, args, q_len, kv_len, past_len);
    if (allowed != ctx.mod().end())
        bias = sum_or(ctx, bias, ctx.add("where", {allowed, ctx.add_scalar(t, 0.0), ctx.add_scalar(t, neg_inf)}));
    return bias;
}

// Rows whose bias is -inf everywhere attend nothing; ONNX defines them as
// zero (softmax alone would give NaN). end() when no row can be fully masked.
instruction_ref fully_masked_rows(const node_context& ctx, instruction_ref bias) {
    if (bias == ctx.mod().end()) return bias;
    const auto last = static_cast<std::int64_t>(lens_of(bias).size()) - 1;
    auto row_max = ctx.add("reduce_max", {bias}, value_map{{"axes", int_list(dims_t{last})}, {"keepdims", true}});
    auto masked = ctx.add("equal", {row_max, ctx.add_scalar(type_of(bias), neg_inf)});
    if (auto known = ctx.constant(masked)) {
        auto flags = known->to_vector<int>();
        if (std::none_of(flags.begin(), flags.end(), [](int f) { return f != 0; })) return ctx.mod().end();
    }
    return masked;
}

dtype softmax_type(const node_context& ctx, dtype t) {
    if (!ctx.has_attribute("softmax_precision")) return t;
    const auto precision = static_cast<std::int32_t>(ctx.get_int("softmax_precision", 1));
    const dtype s = to_dtype(precision, "softmax_precision");
    if (s != dtype::float_type && s != dtype::half_type && s != dtype::double_type && s != dtype::bf16_type)
        ctx.fail(error_kind::invalid_argument, "softmax_precision must be a floating-point type");
    return s;
}

args_t parse_attention(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 7);
    if (ctx.has_input(args, 4) != ctx.has_input(args, 5))
        ctx.fail(error_kind::invalid_argument, "past_key and past_value must be given together");
    if (ctx.has_input(args, 4) && ctx.has_input(args, 6))
        ctx.fail(error_kind::invalid_argument, "nonpad_kv_seqlen cannot be combined with past_key / past_value");
    auto [q, k, v, packed] = to_4d(ctx, args);
    const dtype t = type_of(q);
    std::int64_t past_len = 0;
    if (ctx.has_input(args, 4)) {
        past_len = dim(args[4], 2);
        k = ctx.add("concat", {args[4], k}, value_map{{"axis", std::int64_t{2}}});
        v = ctx.add("concat", {args[5], v}, value_map{{"axis", std::int64_t{2}}});
    }
    check_shapes(ctx, q, k, v);
    const std::int64_t batch = dim(q, 0), q_heads = dim(q, 1), q_len = dim(q, 2);
    const std::int64_t kv_heads = dim(k, 1), kv_len = dim(k, 2);
    const std::int64_t group = q_heads / kv_heads;

    // Q and K are each scaled by sqrt(scale), as the spec does against overflow.
    const double scale = ctx.has_attribute("scale") ? ctx.get_float("scale", 1.0) : 1.0 / std::sqrt(double(dim(q, 3)));
    auto root = ctx.add_scalar(t, std::sqrt(scale));
    // The query heads of one KV head become rows of one product: [B, Hkv, G * Sq, D].
    auto q_rows = reshape(ctx, ctx.add("mul", {q, root}), {batch, kv_heads, group * q_len, dim(q, 3)});
    auto k_t = transpose(ctx, ctx.add("mul", {k, root}), {0, 1, 3, 2});
    auto scores = reshape(ctx, ctx.add("dot", {q_rows, k_t}), {batch, q_heads, q_len, kv_len});

    const double softcap = ctx.get_float("softcap", 0.0);
    auto raw_scores = scores;
    if (softcap > 0) {
        auto cap = ctx.add_scalar(t, softcap);
        scores = ctx.add("mul", {ctx.add("tanh", {ctx.add("div", {scores, cap})}), cap});
    }
    auto capped_scores = scores;
    auto bias = attention_bias(ctx, args, q_len, kv_len, past_len, t);
    if (bias != ctx.mod().end()) scores = ctx.add("add", {scores, bias});

    const dtype st = softmax_type(ctx, t);
    auto probs = ctx.add("softmax", {convert(ctx, scores, st)}, value_map{{"axis", std::int64_t{-1}}});
    auto masked = fully_masked_rows(ctx, bias);
    if (masked != ctx.mod().end()) probs = ctx.add("where", {masked, ctx.add_scalar(st, 0.0), probs});
    probs = convert(ctx, probs, t);

    auto prob_rows = reshape(ctx, probs, {batch, kv_heads, group * q_len, kv_len});
    auto y = reshape(ctx, ctx.add("dot", {prob_rows, v}), {batch, q_heads, q_len, dim(v, 3)});
    if (packed) y = reshape(ctx, transpose(ctx, y, {0, 2, 1, 3}), {batch, q_len, -1});

    const std::int64_t mode = ctx.get_int("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
        ctx.fail(error_kind::invalid_argument, "qk_matmul_output_mode must be 0 to 3, got " + std::to_string(mode));
    const instruction_ref qk_outputs[] = {raw_scores, capped_scores, scores, probs};
    return {y, k, v, qk_outputs[mode]};
}

}  // namespace

void add_attention_parsers(parser_table& table) { table["Attention"] = parse_attention; }

}  // namespace kiln::onnx_import
