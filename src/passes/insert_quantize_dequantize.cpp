#include "passes/insert_quantize_dequantize.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ops/pool.hpp"
#include "ops/quant.hpp"
#include "passes/constant_value.hpp"
#include "passes/matcher.hpp"

namespace kiln {

namespace {

// Float types a quantize_linear can read (its scale takes the same type).
bool is_quantizable_float(dtype t) {
    return t == dtype::half_type || t == dtype::bf16_type || t == dtype::float_type || t == dtype::double_type;
}

std::string joined(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

std::set<std::string> chosen_ops(const std::vector<std::string>& ins_names, const std::vector<std::string>& supported,
                                 const std::string& caller) {
    std::set<std::string> ops;
    for (const auto& name : ins_names) {
        if (name == "all") {
            ops.insert(supported.begin(), supported.end());
        } else if (std::find(supported.begin(), supported.end(), name) != supported.end()) {
            ops.insert(name);
        } else {
            fail(caller + ": ins_names has '" + name + "', but only " + joined(supported) +
                 " (or \"all\") can be quantized");
        }
    }
    return ops;
}

// The instructions an exclude entry names: the one with that printed name
// ("@12", a parameter's name), else every one with that origin (an ONNX
// node's instructions share its name: a Gemm's dot, scale and bias add).
std::set<const instruction*> excluded_instructions(const module& m, const std::vector<std::string>& exclude,
                                                   const std::string& caller) {
    std::unordered_map<std::string, const instruction*> by_name;
    for (const auto& [ins, name] : m.instruction_names()) by_name.emplace(name, ins);
    std::unordered_map<std::string, std::vector<const instruction*>> by_origin;
    for (const auto& ins : m)
        if (!ins.origin().empty()) by_origin[ins.origin()].push_back(&ins);
    std::set<const instruction*> out;
    for (const auto& name : exclude) {
        if (auto it = by_name.find(name); it != by_name.end()) {
            out.insert(it->second);
        } else if (auto found = by_origin.find(name); found != by_origin.end()) {
            out.insert(found->second.begin(), found->second.end());
        } else {
            fail(caller + ": exclude names '" + name + "', which is neither the printed name (\"@12\") nor the " +
                 "origin (ONNX node name) of an instruction of module '" + m.name() + "'");
        }
    }
    return out;
}

// The output-channel axis of a constant input: convolution weights
// [M, C / group, kernel...] have it first; dot's second input [..., K, N]
// last. Elsewhere the value is quantized per tensor.
std::int64_t channel_axis_of(const instruction& consumer, std::size_t input) {
    if (input != 1) return -1;
    const auto rank = static_cast<std::int64_t>(consumer.inputs()[1]->get_shape().ndim());
    if (consumer.name() == "convolution") return 0;
    if (consumer.name() == "dot" && rank >= 2) return rank - 1;
    return -1;
}

template <class T>
void accumulate_channel_maxima(const argument& w, std::int64_t axis, std::vector<double>& maxima) {
    const T* data = w.data_as<const T>();
    const auto& lens = w.get_shape().lens();
    std::size_t inner = 1;
    if (axis >= 0)
        for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < lens.size(); ++d) inner *= lens[d];
    const std::size_t channels = maxima.size();
    const std::size_t n = w.get_shape().elements();
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t c = axis < 0 ? 0 : (i / inner) % channels;
        const double a = std::fabs(static_cast<double>(data[i]));
        if (!std::isfinite(a)) fail("weight value " + std::to_string(static_cast<double>(data[i])) + " is not finite");
        maxima[c] = std::max(maxima[c], a);
    }
}

// Inserts a float literal of `type` holding `values` (a scalar for one value).
instruction_ref insert_scale(module& m, instruction_ref pos, dtype type, const std::vector<float>& values) {
    std::vector<std::size_t> lens;
    if (values.size() != 1) lens.push_back(values.size());
    return m.insert_literal(pos, literal(shape{type, lens}, values));
}

instruction_ref first_use(module& m, const quantized_value& v) {
    std::unordered_set<const instruction*> users;
    for (const auto& [ins, index] : v.uses) users.insert(&*ins);
    for (auto it = m.begin(); it != m.end(); ++it)
        if (users.count(&*it)) return it;
    fail("insert quantize / dequantize: the chosen uses are not in module '" + m.name() + "'");
}

void reroute(module& m, const quantized_value& v, instruction_ref replacement) {
    for (const auto& [ins, index] : v.uses) {
        std::vector<instruction_ref> inputs = ins->inputs();
        inputs.at(index) = replacement;
        m.replace_instruction(ins, ins->get_operator(), inputs, ins->module_inputs());
    }
}

}  // namespace

std::vector<quantized_value> plan_quantized_values(module& m, const std::vector<std::string>& ins_names,
                                                   const std::vector<std::string>& exclude,
                                                   const std::vector<std::string>& supported_ops,
                                                   const std::string& caller) {
    const std::set<std::string> ops = chosen_ops(ins_names, supported_ops, caller);
    const std::set<const instruction*> excluded = excluded_instructions(m, exclude, caller);
    std::vector<quantized_value> planned;
    std::map<std::pair<const instruction*, std::int64_t>, std::size_t> index_of;  // (value, axis) -> planned
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (!ops.count(ins->name()) || excluded.count(&*ins)) continue;
        for (std::size_t i = 0; i < ins->inputs().size() && i < 2; ++i) {
            instruction_ref in = ins->inputs()[i];
            if (!is_quantizable_float(in->get_shape().type()) || in->name() == "dequantize_linear") continue;
            const bool weight = match::is_constant_instruction(*in);
            const std::int64_t axis = weight ? channel_axis_of(*ins, i) : -1;
            auto key = std::make_pair(&*in, axis);
            auto found = index_of.find(key);
            if (found == index_of.end()) {
                found = index_of.emplace(key, planned.size()).first;
                planned.push_back(quantized_value{in, {}, weight, axis});
            }
            planned[found->second].uses.emplace_back(ins, i);
        }
    }
    return planned;
}

namespace {

// x, or x + a constant (a convolution's bias as ONNX import writes it).
instruction_ref without_constant_bias(instruction_ref x) {
    if (x->name() != "add" || x->inputs().size() != 2) return x;
    for (std::size_t i = 0; i < 2; ++i)
        if (match::is_constant_instruction(*x->inputs()[1 - i])) return x->inputs()[i];
    return x;
}

}  // namespace

void add_residual_uses(module& m, std::vector<quantized_value>& planned) {
    std::unordered_set<const instruction*> quantized_ops;
    for (const auto& v : planned)
        for (const auto& [ins, index] : v.uses) quantized_ops.insert(&*ins);
    auto is_quantized_convolution = [&](instruction_ref x) {
        x = without_constant_bias(x);
        return x->name() == "convolution" && quantized_ops.count(&*x) > 0;
    };
    auto is_residual_add = [](instruction_ref add) {
        return add->name() == "add" && add->inputs().size() == 2 && add->inputs()[0] != add->inputs()[1] &&
               add->inputs()[0]->get_shape().lens() == add->inputs()[1]->get_shape().lens();
    };
    std::unordered_set<const instruction*> planned_values;
    for (auto& v : planned) {
        if (v.is_weight) continue;
        planned_values.insert(&*v.value);
        std::vector<std::pair<instruction_ref, std::size_t>> residuals;
        for (instruction_ref user : v.value->outputs()) {
            if (!is_residual_add(user)) continue;
            const std::size_t mine = user->inputs()[0] == v.value ? 0 : 1;
            if (is_quantized_convolution(user->inputs()[1 - mine])) residuals.emplace_back(user, mine);
        }
        // outputs() may list a user twice; one reroute each.
        std::sort(residuals.begin(), residuals.end(), [](const auto& a, const auto& b) { return &*a.first < &*b.first; });
        residuals.erase(std::unique(residuals.begin(), residuals.end()), residuals.end());
        v.uses.insert(v.uses.end(), residuals.begin(), residuals.end());
    }
    // Two quantized convolutions meeting (a stage's first block and its
    // downsampling shortcut): the one computed first is quantized, so the
    // other takes it as an int8 residual; it needs calibrating like any
    // activation.
    std::unordered_map<const instruction*, std::size_t> order;
    for (auto it = m.begin(); it != m.end(); ++it) order.emplace(&*it, order.size());
    for (auto add = m.begin(); add != m.end(); ++add) {
        if (!is_residual_add(add) || !is_quantized_convolution(add->inputs()[0]) ||
            !is_quantized_convolution(add->inputs()[1]))
            continue;
        const std::size_t first = order.at(&*add->inputs()[0]) < order.at(&*add->inputs()[1]) ? 0 : 1;
        instruction_ref value = add->inputs()[first];
        if (planned_values.count(&*value) || value->outputs().size() != 1) continue;
        planned_values.insert(&*value);
        planned.push_back(quantized_value{value, {{add, first}}, false, -1});
    }
}

void add_max_pooling_uses(module& m, std::vector<quantized_value>& planned) {
    std::unordered_set<const instruction*> quantized_ops, planned_values;
    for (const auto& v : planned) {
        planned_values.insert(&*v.value);
        for (const auto& [ins, index] : v.uses) quantized_ops.insert(&*ins);
    }
    auto from_quantized_convolution = [&](instruction_ref x) {
        if ((x->name() == "relu" && x->inputs().size() == 1) || x->name() == "clip") x = x->inputs()[0];
        x = without_constant_bias(x);
        return x->name() == "convolution" && quantized_ops.count(&*x) > 0;
    };
    for (auto pool = m.begin(); pool != m.end(); ++pool) {
        const auto* pooling = pool->get_operator().get_if<op::pooling>();
        if (pooling == nullptr || pooling->mode != op::pooling_mode::max) continue;
        instruction_ref value = pool->inputs()[0];
        if (planned_values.count(&*pool) || planned_values.count(&*value) || value->outputs().size() != 1 ||
            !from_quantized_convolution(value))
            continue;
        planned_values.insert(&*value);
        planned.push_back(quantized_value{value, {{pool, 0}}, false, -1});
    }
}

activation_quantization choose_activation_quantization(double lo, double hi, const quantization_scheme& scheme,
                                                       bool unsigned_allowed, bool any_range_unsigned) {
    if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
        fail("activation range [" + std::to_string(lo) + ", " + std::to_string(hi) + "] is not a finite range");
    activation_quantization q;
    q.type = scheme.type;
    if (!scheme.activation_zero_point) {
        const double a = std::max(std::fabs(lo), std::fabs(hi));
        q.scale = a > 0 ? static_cast<float>(a / scheme.activation_limit) : 1.0f;
        return q;
    }
    // A non-negative range (or, for a product's source, any range) as
    // uint8: the levels int8 would give it, codes and zero point shifted by 128.
    const bool as_unsigned = scheme.unsigned_nonnegative_activations && unsigned_allowed &&
                             scheme.type == dtype::int8_type && (lo >= 0 || any_range_unsigned);
    if (as_unsigned) q.type = dtype::uint8_type;
    // int8 with a zero point, ONNX Runtime's asymmetric choice: the range
    // always holds 0, which must be exact (zero padding, ReLU outputs).
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
    const double qmin = as_unsigned ? 0 : -128, qmax = as_unsigned ? 255 : 127;
    const double scale = (hi - lo) / (qmax - qmin);
    if (!(scale > 0) || !std::isfinite(static_cast<float>(scale))) return q;  // only zeros seen: any scale is exact
    q.scale = static_cast<float>(scale);
    const double zp = std::nearbyint(qmin - lo / static_cast<double>(q.scale));
    q.zero_point = static_cast<std::int64_t>(std::clamp(zp, qmin, qmax));
    return q;
}

bool accepts_unsigned_codes(const quantized_value& v) {
    for (const auto& [user, index] : v.uses)
        if (user->name() == "dot" && index == 1) return false;
    return true;
}

bool reads_only_as_product_source(const quantized_value& v) {
    if (v.uses.empty()) return false;
    for (const auto& [user, index] : v.uses)
        if (user->name() != "dot" || index != 0) return false;
    return true;
}

std::vector<float> choose_weight_scales(const argument& weights, std::int64_t channel_axis, double limit) {
    const shape& s = weights.get_shape();
    if (!s.standard()) return choose_weight_scales(weights.contiguous(), channel_axis, limit);
    const std::size_t channels = channel_axis < 0 ? 1 : s.lens().at(static_cast<std::size_t>(channel_axis));
    std::vector<double> maxima(channels, 0.0);
    visit_type(s.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) accumulate_channel_maxima<T>(weights, channel_axis, maxima);
    });
    std::vector<float> scales(channels);
    for (std::size_t c = 0; c < channels; ++c) {
        const float scale = static_cast<float>(maxima[c] / limit);
        scales[c] = scale > 0 ? scale : 1.0f;
    }
    return scales;
}

argument evaluate_constant(const instruction& ins) {
    std::optional<argument> value = constant_value(ins, no_element_limit);
    if (!value) fail("evaluate_constant: the instruction is not a constant that evaluates");
    return *std::move(value);
}

void insert_activation_qdq(module& m, const quantized_value& v, const activation_quantization& q,
                           const quantization_scheme& scheme) {
    const instruction_ref pos = first_use(m, v);
    const dtype float_type = v.value->get_shape().type();
    instruction_ref scale = insert_scale(m, pos, float_type, {q.scale});
    op::quantize_linear quantize;
    op::dequantize_linear dequantize;
    quantize.output_type = q.type;
    std::vector<instruction_ref> quantize_inputs{v.value, scale};
    std::vector<instruction_ref> dequantize_tail{scale};
    if (scheme.activation_zero_point) {
        instruction_ref zero_point =
            m.insert_literal(pos, literal(shape{q.type, {}}, std::vector<std::int64_t>{q.zero_point}));
        quantize_inputs.push_back(zero_point);
        dequantize_tail.push_back(zero_point);
    }
    instruction_ref quantized = m.insert_instruction(pos, quantize, quantize_inputs);
    std::vector<instruction_ref> dequantize_inputs{quantized};
    dequantize_inputs.insert(dequantize_inputs.end(), dequantize_tail.begin(), dequantize_tail.end());
    reroute(m, v, m.insert_instruction(pos, dequantize, dequantize_inputs));
}

void insert_weight_qdq(module& m, const quantized_value& v, const quantization_scheme& scheme) {
    const std::int64_t axis = scheme.weights_per_channel ? v.channel_axis : -1;
    std::vector<float> scales = choose_weight_scales(evaluate_constant(*v.value), axis, scheme.weight_limit);
    const instruction_ref pos = first_use(m, v);
    instruction_ref scale = insert_scale(m, pos, v.value->get_shape().type(), scales);
    op::quantize_linear quantize;
    op::dequantize_linear dequantize;
    quantize.output_type = scheme.type;
    // A per-tensor scale ignores the axis; keep the op's default then.
    if (scales.size() != 1) quantize.axis = dequantize.axis = axis;
    instruction_ref quantized = m.insert_instruction(pos, quantize, {v.value, scale});
    reroute(m, v, m.insert_instruction(pos, dequantize, {quantized, scale}));
}

void insert_int8_weight_codes(module& m, const quantized_value& v) {
    const argument weights = evaluate_constant(*v.value).contiguous();
    const std::vector<float> scales = choose_weight_scales(weights, v.channel_axis, 127);
    const shape& s = weights.get_shape();
    // Runs of `inner` elements share a scale; the channels repeat every `channels` runs.
    const std::size_t inner =
        v.channel_axis < 0 ? s.elements() : s.strides().at(static_cast<std::size_t>(v.channel_axis));
    const std::size_t channels = scales.size();
    const float* w = weights.data_as<float>();
    std::vector<std::int8_t> codes(s.elements());
    for (std::size_t run = 0; run * inner < codes.size(); ++run) {
        const float scale = scales[run % channels];
        for (std::size_t i = run * inner; i < (run + 1) * inner; ++i) {
            // quantize_linear's code: the quotient in float32, rounded half to even, saturated.
            const float quotient = w[i] / scale;
            codes[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(quotient), -128.0f, 127.0f));
        }
    }
    const instruction_ref pos = first_use(m, v);
    const instruction_ref code_literal = m.insert_literal(pos, literal(shape{dtype::int8_type, s.lens()}, codes));
    const instruction_ref scale = insert_scale(m, pos, dtype::float_type, scales);
    op::dequantize_linear dequantize;
    if (channels != 1) dequantize.axis = v.channel_axis;
    reroute(m, v, m.insert_instruction(pos, dequantize, {code_literal, scale}));
}

}  // namespace kiln
