// ONNX recurrent ops RNN, GRU and LSTM, unrolled over the static sequence
// length into existing IR ops: one matrix product of the whole input with the
// input weights, then per step a product with the recurrence weights, gate
// slices, activations and the state update. sequence_lens (constant or not)
// becomes a per-step mask: a batch entry past its length keeps its state and
// writes zeros to Y, which also makes the reverse direction start at the
// entry's last valid step. LinearAttention is unrolled over the tokens the
// same way.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;
using dims_t = std::vector<std::int64_t>;

dtype type_of(instruction_ref x) { return x->get_shape().type(); }
const std::vector<std::size_t>& lens_of(instruction_ref x) { return x->get_shape().lens(); }
std::int64_t dim(instruction_ref x, std::size_t i) { return static_cast<std::int64_t>(lens_of(x)[i]); }

instruction_ref slice_axis(const node_context& ctx, instruction_ref x, std::int64_t axis, std::int64_t start,
                           std::int64_t end) {
    return ctx.add("slice", {x}, value_map{{"axes", int_list(dims_t{axis})},
                                           {"starts", int_list(dims_t{start})},
                                           {"ends", int_list(dims_t{end})},
                                           {"steps", int_list(dims_t{1})}});
}

// Entry i of axis, with that axis removed.
instruction_ref take(const node_context& ctx, instruction_ref x, std::int64_t axis, std::int64_t i) {
    return ctx.add("squeeze", {slice_axis(ctx, x, axis, i, i + 1)}, value_map{{"axes", int_list(dims_t{axis})}});
}

instruction_ref transpose(const node_context& ctx, instruction_ref x, const dims_t& perm) {
    return ctx.add("transpose", {x}, value_map{{"permutation", int_list(perm)}});
}

instruction_ref unsqueeze(const node_context& ctx, instruction_ref x, const dims_t& axes) {
    return ctx.add("unsqueeze", {x}, value_map{{"axes", int_list(axes)}});
}

instruction_ref concat(const node_context& ctx, const args_t& xs, std::int64_t axis) {
    if (xs.size() == 1) return xs.front();
    return ctx.add("concat", xs, value_map{{"axis", axis}});
}

// One activation function named by the ONNX recurrent-op attribute, with its
// alpha and beta (the attribute values or the spec's defaults).
struct activation {
    std::string name;
    double alpha = 0;
    double beta = 0;
};

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

instruction_ref apply(const node_context& ctx, const activation& act, instruction_ref x) {
    const dtype t = type_of(x);
    const std::string n = lower(act.name);
    auto scalar = [&](double v) { return ctx.add_scalar(t, v); };
    if (n == "sigmoid") return ctx.add("sigmoid", {x});
    if (n == "tanh") return ctx.add("tanh", {x});
    if (n == "relu") return ctx.add("relu", {x});
    if (n == "affine") return ctx.add("add", {ctx.add("mul", {x, scalar(act.alpha)}), scalar(act.beta)});
    if (n == "leakyrelu") {
        auto neg = ctx.add("less", {x, scalar(0)});
        return ctx.add("where", {neg, ctx.add("mul", {x, scalar(act.alpha)}), x});
    }
    if (n == "thresholdedrelu")
        return ctx.add("where", {ctx.add("greater", {x, scalar(act.alpha)}), x, scalar(0)});
    if (n == "scaledtanh")
        return ctx.add("mul", {ctx.add("tanh", {ctx.add("mul", {x, scalar(act.beta)})}), scalar(act.alpha)});
    if (n == "hardsigmoid") {
        auto lin = ctx.add("add", {ctx.add("mul", {x, scalar(act.alpha)}), scalar(act.beta)});
        return ctx.add("clip", {lin, scalar(0), scalar(1)});
    }
    if (n == "elu") {
        auto em1 = ctx.add("mul", {ctx.add("sub", {ctx.add("exp", {x}), scalar(1)}), scalar(act.alpha)});
        return ctx.add("where", {ctx.add("less", {x, scalar(0)}), em1, x});
    }
    if (n == "softsign") return ctx.add("div", {x, ctx.add("add", {ctx.add("abs", {x}), scalar(1)})});
    if (n == "softplus") return ctx.add("log", {ctx.add("add", {ctx.add("exp", {x}), scalar(1)})});
    ctx.fail(error_kind::not_implemented, "activation '" + act.name + "' is not supported");
}

// Defaults of alpha and beta for the activations that take them.
std::pair<double, double> default_alpha_beta(const std::string& lowered) {
    if (lowered == "leakyrelu") return {0.01, 0};
    if (lowered == "thresholdedrelu") return {1.0, 0};
    if (lowered == "elu") return {1.0, 0};
    if (lowered == "hardsigmoid") return {0.2, 0.5};
    if (lowered == "affine" || lowered == "scaledtanh") return {1.0, 0};
    return {0, 0};
}

bool takes_alpha(const std::string& l) {
    return l == "leakyrelu" || l == "thresholdedrelu" || l == "elu" || l == "hardsigmoid" || l == "affine" ||
           l == "scaledtanh";
}
bool takes_beta(const std::string& l) { return l == "hardsigmoid" || l == "affine" || l == "scaledtanh"; }

// The activations of each direction: `per_direction` functions each, from the
// attribute (one direction's list serves both) or the defaults. Alphas and
// betas are consumed in order by the functions that take them.
std::vector<std::vector<activation>> read_activations(const node_context& ctx, const std::vector<std::string>& defaults,
                                                     std::int64_t directions) {
    const auto per = defaults.size();
    std::vector<std::string> names;
    for (const auto& attr : ctx.node().attribute())
        if (attr.name() == "activations")
            for (const auto& s : attr.strings()) names.push_back(s);
    if (names.empty())
        for (std::int64_t d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
    if (names.size() == per && directions == 2) {
        auto copy = names;
        names.insert(names.end(), copy.begin(), copy.end());
    }
    if (names.size() != per * static_cast<std::size_t>(directions))
        ctx.fail(error_kind::invalid_argument, "activations must list " + std::to_string(per * directions) +
                                                   " functions, got " + std::to_string(names.size()));
    const auto alphas = ctx.get_floats("activation_alpha");
    const auto betas = ctx.get_floats("activation_beta");
    std::size_t next_alpha = 0;
    std::size_t next_beta = 0;
    std::vector<std::vector<activation>> out(static_cast<std::size_t>(directions));
    for (std::size_t i = 0; i < names.size(); ++i) {
        activation a{names[i]};
        const auto l = lower(a.name);
        std::tie(a.alpha, a.beta) = default_alpha_beta(l);
        if (takes_alpha(l) && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
        if (takes_beta(l) && next_beta < betas.size()) a.beta = betas[next_beta++];
        out[i / per].push_back(a);
    }
    return out;
}

// Which recurrent op is being unrolled.
enum class cell { rnn, gru, lstm };

// Everything the per-direction unrolling needs, read once from the node.
struct recurrent_setup {
    cell kind = cell::rnn;
    std::int64_t gates = 1;
    std::int64_t hidden = 0;
    std::int64_t directions = 1;
    std::string direction;
    bool batch_major = false;        // layout 1
    instruction_ref x;               // [S, B, I]
    std::optional<double> clip;
    bool linear_before_reset = false;
    bool input_forget = false;
    std::vector<std::vector<activation>> acts;
};

instruction_ref maybe_clip(const node_context& ctx, const recurrent_setup& s, instruction_ref x) {
    if (!s.clip) return x;
    const dtype t = type_of(x);
    return ctx.add("clip", {x, ctx.add_scalar(t, -*s.clip), ctx.add_scalar(t, *s.clip)});
}

// Gate g of a [B, gates * H] tensor.
instruction_ref gate(const node_context& ctx, const recurrent_setup& s, instruction_ref x, std::int64_t g) {
    return slice_axis(ctx, x, 1, g * s.hidden, (g + 1) * s.hidden);
}

struct direction_result {
    args_t ys;  // per time step (in time order), [B, H]
    instruction_ref h;
    instruction_ref c;
};

direction_result run_direction(const node_context& ctx, const recurrent_setup& s, const args_t& args,
                               std::int64_t d, bool reverse, instruction_ref h0, instruction_ref c0) {
    const dtype t = type_of(s.x);
    const std::int64_t steps = dim(s.x, 0);
    const std::int64_t gh = s.gates * s.hidden;
    const auto& act = s.acts[static_cast<std::size_t>(d)];
    auto w_t = transpose(ctx, take(ctx, args[1], 0, d), {1, 0});  // [I, gates*H]
    auto r_t = transpose(ctx, take(ctx, args[2], 0, d), {1, 0});  // [H, gates*H]
    // The whole input times the input weights at once: [S, B, gates*H].
    auto xw = ctx.add("dot", {s.x, w_t});
    std::optional<instruction_ref> rb;  // recurrence bias, kept apart where GRU needs it
    if (ctx.has_input(args, 3)) {
        auto b = take(ctx, args[3], 0, d);
        auto wb = slice_axis(ctx, b, 0, 0, gh);
        auto rbias = slice_axis(ctx, b, 0, gh, 2 * gh);
        if (s.kind == cell::gru) {
            xw = ctx.add("add", {xw, wb});
            rb = rbias;
        } else {
            xw = ctx.add("add", {xw, ctx.add("add", {wb, rbias})});
        }
    }
    std::optional<instruction_ref> p_i, p_o, p_f;
    if (s.kind == cell::lstm && ctx.has_input(args, 7)) {
        auto p = take(ctx, args[7], 0, d);
        p_i = slice_axis(ctx, p, 0, 0, s.hidden);
        p_o = slice_axis(ctx, p, 0, s.hidden, 2 * s.hidden);
        p_f = slice_axis(ctx, p, 0, 2 * s.hidden, 3 * s.hidden);
    }
    const bool masked = ctx.has_input(args, 4);
    auto zero = ctx.add_scalar(t, 0);
    auto one = ctx.add_scalar(t, 1);
    auto h = h0;
    auto c = c0;
    direction_result out;
    out.ys.resize(static_cast<std::size_t>(steps));
    for (std::int64_t k = 0; k < steps; ++k) {
        const std::int64_t step = reverse ? steps - 1 - k : k;
        auto xt = take(ctx, xw, 0, step);  // [B, gates*H]
        auto hr = ctx.add("dot", {h, r_t});
        instruction_ref h_new;
        instruction_ref c_new = c;
        if (s.kind == cell::rnn) {
            h_new = apply(ctx, act[0], maybe_clip(ctx, s, ctx.add("add", {xt, hr})));
        } else if (s.kind == cell::gru) {
            if (rb) hr = ctx.add("add", {hr, *rb});
            // Gates z, r, h.
            auto z = apply(ctx, act[0], maybe_clip(ctx, s, ctx.add("add", {gate(ctx, s, xt, 0), gate(ctx, s, hr, 0)})));
            auto r = apply(ctx, act[0], maybe_clip(ctx, s, ctx.add("add", {gate(ctx, s, xt, 1), gate(ctx, s, hr, 1)})));
            instruction_ref pre;
            if (s.linear_before_reset) {
                pre = ctx.add("add", {gate(ctx, s, xt, 2), ctx.add("mul", {r, gate(ctx, s, hr, 2)})});
            } else {
                auto rh = ctx.add("mul", {r, h});
                auto r_h = slice_axis(ctx, r_t, 1, 2 * s.hidden, 3 * s.hidden);
                auto rec = ctx.add("dot", {rh, r_h});
                if (rb) rec = ctx.add("add", {rec, slice_axis(ctx, *rb, 0, 2 * s.hidden, 3 * s.hidden)});
                pre = ctx.add("add", {gate(ctx, s, xt, 2), rec});
            }
            auto cand = apply(ctx, act[1], maybe_clip(ctx, s, pre));
            h_new = ctx.add("add", {ctx.add("mul", {ctx.add("sub", {one, z}), cand}), ctx.add("mul", {z, h})});
        } else {
            // Gates i, o, f, c.
            auto pre = ctx.add("add", {xt, hr});
            auto pi = gate(ctx, s, pre, 0);
            auto po = gate(ctx, s, pre, 1);
            auto pf = gate(ctx, s, pre, 2);
            auto pc = gate(ctx, s, pre, 3);
            if (p_i) pi = ctx.add("add", {pi, ctx.add("mul", {*p_i, c})});
            if (p_f) pf = ctx.add("add", {pf, ctx.add("mul", {*p_f, c})});
            auto i = apply(ctx, act[0], maybe_clip(ctx, s, pi));
            auto f = s.input_forget ? ctx.add("sub", {one, i}) : apply(ctx, act[0], maybe_clip(ctx, s, pf));
            auto g = apply(ctx, act[1], maybe_clip(ctx, s, pc));
            c_new = ctx.add("add", {ctx.add("mul", {f, c}), ctx.add("mul", {i, g})});
            if (p_o) po = ctx.add("add", {po, ctx.add("mul", {*p_o, c_new})});
            auto o = apply(ctx, act[0], maybe_clip(ctx, s, po));
            h_new = ctx.add("mul", {o, apply(ctx, act[2], c_new)});
        }
        instruction_ref y = h_new;
        if (masked) {
            // [B, 1]: does this step lie within each batch entry's sequence?
            auto lens = args[4];
            auto valid = unsqueeze(ctx, ctx.add("less", {ctx.add_scalar(type_of(lens), static_cast<double>(step)), lens}),
                                   {1});
            y = ctx.add("where", {valid, h_new, zero});
            h_new = ctx.add("where", {valid, h_new, h});
            if (s.kind == cell::lstm) c_new = ctx.add("where", {valid, c_new, c});
        }
        out.ys[static_cast<std::size_t>(step)] = y;
        h = h_new;
        c = c_new;
    }
    out.h = h;
    out.c = c;
    return out;
}

args_t parse_recurrent(const node_context& ctx, const args_t& args, cell kind) {
    recurrent_setup s;
    s.kind = kind;
    s.gates = kind == cell::rnn ? 1 : kind == cell::gru ? 3 : 4;
    ctx.expect_inputs(args, 3, kind == cell::lstm ? 8 : 6);
    s.batch_major = ctx.get_int("layout", 0) != 0;
    s.direction = ctx.get_string("direction", "forward");
    if (s.direction != "forward" && s.direction != "reverse" && s.direction != "bidirectional")
        ctx.fail(error_kind::invalid_argument, "direction must be forward, reverse or bidirectional, got '" +
                                                   s.direction + "'");
    s.directions = s.direction == "bidirectional" ? 2 : 1;
    auto x = args[0];
    if (lens_of(x).size() != 3) ctx.fail(error_kind::invalid_argument, "X must be 3-D, got " + to_string(lens_of(x)));
    if (s.batch_major) x = transpose(ctx, x, {1, 0, 2});
    s.x = x;
    const auto& w = lens_of(args[1]);
    const auto& r = lens_of(args[2]);
    if (w.size() != 3 || r.size() != 3)
        ctx.fail(error_kind::invalid_argument, "W and R must be 3-D, got " + to_string(w) + " and " + to_string(r));
    s.hidden = ctx.get_int("hidden_size", static_cast<std::int64_t>(r[2]));
    const auto dirs = static_cast<std::size_t>(s.directions);
    const auto gh = static_cast<std::size_t>(s.gates * s.hidden);
    if (w[0] != dirs || r[0] != dirs || w[1] != gh || r[1] != gh || w[2] != lens_of(x)[2] ||
        r[2] != static_cast<std::size_t>(s.hidden))
        ctx.fail(error_kind::invalid_argument, "W " + to_string(w) + " and R " + to_string(r) +
                                                   " do not match the direction count, hidden size " +
                                                   std::to_string(s.hidden) + " and input " + to_string(lens_of(x)));
    if (ctx.has_attribute("clip")) s.clip = ctx.get_float("clip", 0);
    s.linear_before_reset = ctx.get_int("linear_before_reset", 0) != 0;
    s.input_forget = ctx.get_int("input_forget", 0) != 0;
    const std::vector<std::string> defaults =
        kind == cell::rnn ? std::vector<std::string>{"Tanh"}
        : kind == cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    s.acts = read_activations(ctx, defaults, s.directions);

    const dtype t = type_of(x);
    const std::int64_t batch = dim(x, 1);
    // Initial states as [dirs, B, H].
    auto initial = [&](std::size_t i) {
        if (ctx.has_input(args, i)) {
            auto v = args[i];
            return s.batch_major ? transpose(ctx, v, {1, 0, 2}) : v;
        }
        return ctx.add_literal(literal(shape{t, {dirs, static_cast<std::size_t>(batch), static_cast<std::size_t>(s.hidden)}},
                                       std::vector<double>(dirs * static_cast<std::size_t>(batch * s.hidden), 0.0)));
    };
    auto h0 = initial(5);
    auto c0 = kind == cell::lstm ? initial(6) : h0;

    std::vector<direction_result> results;
    for (std::int64_t d = 0; d < s.directions; ++d) {
        const bool reverse = s.direction == "reverse" || d == 1;
        results.push_back(run_direction(ctx, s, args, d, reverse, take(ctx, h0, 0, d), take(ctx, c0, 0, d)));
    }
    // Y: [S, dirs, B, H]; Y_h, Y_c: [dirs, B, H] (layout 1 moves the batch first).
    args_t per_dir_y;
    args_t hs;
    args_t cs;
    for (const auto& res : results) {
        args_t steps;
        for (auto y : res.ys) steps.push_back(unsqueeze(ctx, y, {0, 1}));
        per_dir_y.push_back(concat(ctx, steps, 0));
        hs.push_back(unsqueeze(ctx, res.h, {0}));
        cs.push_back(unsqueeze(ctx, res.c, {0}));
    }
    auto y = concat(ctx, per_dir_y, 1);
    auto yh = concat(ctx, hs, 0);
    auto yc = concat(ctx, cs, 0);
    if (s.batch_major) {
        y = transpose(ctx, y, {2, 0, 1, 3});
        yh = transpose(ctx, yh, {1, 0, 2});
        yc = transpose(ctx, yc, {1, 0, 2});
    }
    if (kind == cell::lstm) return {y, yh, yc};
    return {y, yh};
}

args_t parse_rnn(const node_context& ctx, const args_t& args) { return parse_recurrent(ctx, args, cell::rnn); }
args_t parse_gru(const node_context& ctx, const args_t& args) { return parse_recurrent(ctx, args, cell::gru); }
args_t parse_lstm(const node_context& ctx, const args_t& args) { return parse_recurrent(ctx, args, cell::lstm); }


instruction_ref to_float(const node_context& ctx, instruction_ref x) {
    if (type_of(x) == dtype::float_type) return x;
    return ctx.add("convert", {x}, value_map{{"target_type", to_string(dtype::float_type)}});
}

instruction_ref convert_to(const node_context& ctx, instruction_ref x, dtype t) {
    if (type_of(x) == t) return x;
    return ctx.add("convert", {x}, value_map{{"target_type", to_string(t)}});
}

instruction_ref reshape(const node_context& ctx, instruction_ref x, const dims_t& dims) {
    return ctx.add("reshape", {x}, value_map{{"dims", int_list(dims)}});
}

// LinearAttention: the recurrent state S [B, H_kv, d_k, d_v] updated token by
// token in float32 (gating multiplies S by exp(decay) per head or per key
// row; the delta rule replaces v by beta * (v - S^T k)), then
// S += k (outer) v and o = scale * q^T S. Each KV head serves
// q_num_heads / kv_num_heads consecutive query heads.
args_t parse_linear_attention(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 6);
    const std::string rule = ctx.get_string("update_rule", "gated_delta");
    if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
        ctx.fail(error_kind::invalid_argument,
                 "update_rule must be linear, gated, delta or gated_delta, got '" + rule + "'");
    const bool gating = rule == "gated" || rule == "gated_delta";
    const bool delta = rule == "delta" || rule == "gated_delta";
    if (gating != ctx.has_input(args, 4))
        ctx.fail(error_kind::invalid_argument, "update_rule '" + rule + (gating ? "' requires" : "' forbids") +
                                                   " the decay input");
    if (delta != ctx.has_input(args, 5))
        ctx.fail(error_kind::invalid_argument, "update_rule '" + rule + (delta ? "' requires" : "' forbids") +
                                                   " the beta input");
    const std::int64_t hq = ctx.get_int("q_num_heads", 0);
    const std::int64_t hkv = ctx.get_int("kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
        ctx.fail(error_kind::invalid_argument, "q_num_heads (" + std::to_string(hq) +
                                                   ") must be a positive multiple of kv_num_heads (" +
                                                   std::to_string(hkv) + ")");
    for (std::size_t i = 0; i < 3; ++i)
        if (lens_of(args[i]).size() != 3)
            ctx.fail(error_kind::invalid_argument, "query, key and value must be [B, T, H*D], got " +
                                                       to_string(lens_of(args[i])));
    const std::int64_t b = dim(args[0], 0);
    const std::int64_t steps = dim(args[0], 1);
    const std::int64_t group = hq / hkv;
    if (dim(args[0], 2) % hq != 0 || dim(args[2], 2) % hkv != 0)
        ctx.fail(error_kind::invalid_argument, "query and value widths must divide by their head counts");
    const std::int64_t dk = dim(args[0], 2) / hq;
    const std::int64_t dv = dim(args[2], 2) / hkv;
    if (dim(args[1], 2) != hkv * dk || dim(args[1], 0) != b || dim(args[2], 0) != b || dim(args[1], 1) != steps ||
        dim(args[2], 1) != steps)
        ctx.fail(error_kind::invalid_argument, "key must be [" + std::to_string(b) + ", " + std::to_string(steps) +
                                                   ", " + std::to_string(hkv * dk) + "], got " +
                                                   to_string(lens_of(args[1])));
    const dtype out_type = type_of(args[0]);
    // Time-major views: q [T, B, H_kv, G, d_k], k [T, B, H_kv, d_k], v [T, B, H_kv, d_v].
    auto q = transpose(ctx, reshape(ctx, to_float(ctx, args[0]), {b, steps, hkv, group, dk}), {1, 0, 2, 3, 4});
    auto k = transpose(ctx, reshape(ctx, to_float(ctx, args[1]), {b, steps, hkv, dk}), {1, 0, 2, 3});
    auto v = transpose(ctx, reshape(ctx, to_float(ctx, args[2]), {b, steps, hkv, dv}), {1, 0, 2, 3});
    instruction_ref decay;
    if (gating) {
        const auto& dl = lens_of(args[4]);
        if (dl.size() != 3 || (dim(args[4], 2) != hkv && dim(args[4], 2) != hkv * dk))
            ctx.fail(error_kind::invalid_argument, "decay must be [B, T, kv_num_heads] or [B, T, kv_num_heads*d_k], got " +
                                                       to_string(dl));
        // [T, B, H_kv, 1 or d_k, 1]: scales whole heads or single key rows of S.
        decay = transpose(ctx, reshape(ctx, to_float(ctx, args[4]), {b, steps, hkv, dim(args[4], 2) / hkv, 1}),
                          {1, 0, 2, 3, 4});
        decay = ctx.add("exp", {decay});
    }
    instruction_ref beta;
    if (delta) {
        const auto& bl = lens_of(args[5]);
        if (bl.size() != 3 || (dim(args[5], 2) != hkv && dim(args[5], 2) != 1))
            ctx.fail(error_kind::invalid_argument, "beta must be [B, T, kv_num_heads] or [B, T, 1], got " + to_string(bl));
        beta = transpose(ctx, reshape(ctx, to_float(ctx, args[5]), {b, steps, dim(args[5], 2), 1}), {1, 0, 2, 3});
    }
    const std::vector<std::size_t> state_lens{static_cast<std::size_t>(b), static_cast<std::size_t>(hkv),
                                              static_cast<std::size_t>(dk), static_cast<std::size_t>(dv)};
    instruction_ref state;
    dtype state_type = out_type;
    if (ctx.has_input(args, 3)) {
        if (lens_of(args[3]) != state_lens)
            ctx.fail(error_kind::invalid_argument, "past_state must be " + to_string(state_lens) + ", got " +
                                                       to_string(lens_of(args[3])));
        state_type = type_of(args[3]);
        state = to_float(ctx, args[3]);
    } else {
        std::size_t n = 1;
        for (auto l : state_lens) n *= l;
        state = ctx.add_literal(literal(shape{dtype::float_type, state_lens}, std::vector<double>(n, 0.0)));
    }
    const double scale_attr = ctx.get_float("scale", 0.0);
    const double scale = scale_attr == 0.0 ? 1.0 / std::sqrt(static_cast<double>(dk)) : scale_attr;
    auto scale_lit = ctx.add_scalar(dtype::float_type, scale);
    args_t outs;
    for (std::int64_t t = 0; t < steps; ++t) {
        auto kt = take(ctx, k, 0, t);  // [B, H_kv, d_k]
        auto vt = take(ctx, v, 0, t);  // [B, H_kv, d_v]
        if (gating) state = ctx.add("mul", {state, take(ctx, decay, 0, t)});
        if (delta) {
            // S^T k: [B, H_kv, 1, d_k] x [B, H_kv, d_k, d_v] -> [B, H_kv, d_v].
            auto retrieved = ctx.add("squeeze", {ctx.add("dot", {unsqueeze(ctx, kt, {2}), state})},
                                     value_map{{"axes", int_list(dims_t{2})}});
            vt = ctx.add("mul", {take(ctx, beta, 0, t), ctx.add("sub", {vt, retrieved})});
        }
        state = ctx.add("add", {state, ctx.add("mul", {unsqueeze(ctx, kt, {3}), unsqueeze(ctx, vt, {2})})});
        // [B, H_kv, G, d_k] x [B, H_kv, d_k, d_v] -> [B, H_kv, G, d_v] -> [B, 1, H_q * d_v].
        auto o = ctx.add("mul", {ctx.add("dot", {take(ctx, q, 0, t), state}), scale_lit});
        outs.push_back(reshape(ctx, o, {b, 1, hq * dv}));
    }
    auto output = convert_to(ctx, concat(ctx, outs, 1), out_type);
    return {output, convert_to(ctx, state, state_type)};
}

}  // namespace

void add_recurrent_parsers(parser_table& table) {
    table["RNN"] = parse_rnn;
    table["GRU"] = parse_gru;
    table["LSTM"] = parse_lstm;
    table["LinearAttention"] = parse_linear_attention;
}

}  // namespace kiln::onnx_import
