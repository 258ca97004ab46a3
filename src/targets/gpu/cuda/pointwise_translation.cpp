#include "targets/gpu/cuda/pointwise_translation.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "kiln/errors.hpp"
#include "ops/elementwise.hpp"
#include "ops/fused_pointwise.hpp"
#include "ops/transcendental.hpp"

namespace kiln::pointwise {

namespace {

std::optional<value_type> value_type_of(dtype t) {
    switch (t) {
    case dtype::float_type: return value_type::f32;
    case dtype::half_type: return value_type::f16;
    case dtype::bf16_type: return value_type::bf16;
    case dtype::double_type: return value_type::f64;
    case dtype::int8_type: return value_type::i8;
    case dtype::int16_type: return value_type::i16;
    case dtype::int32_type: return value_type::i32;
    case dtype::int64_type: return value_type::i64;
    case dtype::uint8_type: return value_type::u8;
    case dtype::uint16_type: return value_type::u16;
    case dtype::uint32_type: return value_type::u32;
    case dtype::bool_type: return value_type::boolean;
    default: return std::nullopt;  // uint64 (beyond an int64 register), float8 / int4 storage types
    }
}

bool is_integer(value_type t) { return !is_floating(t) && t != value_type::boolean; }

std::uint8_t width_bits(value_type t) {
    switch (t) {
    case value_type::i8:
    case value_type::u8: return 8;
    case value_type::i16:
    case value_type::u16: return 16;
    case value_type::i32:
    case value_type::u32: return 32;
    default: return 64;
    }
}

// Floating-only unary ops and their opcodes.
const std::map<std::string, opcode>& floating_unary_ops() {
    static const std::map<std::string, opcode> ops{
        {"exp", opcode::f_exp},     {"log", opcode::f_log},       {"sqrt", opcode::f_sqrt},
        {"rsqrt", opcode::f_rsqrt}, {"reciprocal", opcode::f_reciprocal}, {"sin", opcode::f_sin},
        {"cos", opcode::f_cos},     {"tan", opcode::f_tan},       {"tanh", opcode::f_tanh},
        {"sigmoid", opcode::f_sigmoid}, {"erf", opcode::f_erf},   {"floor", opcode::f_floor},
        {"ceil", opcode::f_ceil},   {"round", opcode::f_round},   {"asin", opcode::f_asin},
        {"acos", opcode::f_acos},   {"atan", opcode::f_atan},     {"sinh", opcode::f_sinh},
        {"cosh", opcode::f_cosh},   {"asinh", opcode::f_asinh},   {"acosh", opcode::f_acosh},
        {"atanh", opcode::f_atanh},
    };
    return ops;
}

// Numeric unary ops: {floating opcode, integer opcode}.
const std::map<std::string, std::pair<opcode, opcode>>& numeric_unary_ops() {
    static const std::map<std::string, std::pair<opcode, opcode>> ops{
        {"abs", {opcode::f_abs, opcode::i_abs}},
        {"neg", {opcode::f_neg, opcode::i_neg}},
        {"sign", {opcode::f_sign, opcode::i_sign}},
        {"relu", {opcode::f_relu, opcode::i_relu}},
    };
    return ops;
}

// Numeric binary ops: {floating opcode, integer opcode}; bool inputs are declined.
const std::map<std::string, std::pair<opcode, opcode>>& numeric_binary_ops() {
    static const std::map<std::string, std::pair<opcode, opcode>> ops{
        {"add", {opcode::f_add, opcode::i_add}},       {"sub", {opcode::f_sub, opcode::i_sub}},
        {"mul", {opcode::f_mul, opcode::i_mul}},       {"div", {opcode::f_div, opcode::i_div}},
        {"pow", {opcode::f_pow, opcode::i_pow}},       {"max", {opcode::f_max, opcode::i_max}},
        {"min", {opcode::f_min, opcode::i_min}},       {"less", {opcode::f_less, opcode::i_less}},
        {"greater", {opcode::f_greater, opcode::i_greater}},
    };
    return ops;
}

// The instruction of one step, or nullopt where the interpreter would not match the reference.
std::optional<instruction> translate_step(const operation& op, const std::vector<std::size_t>& args,
                                          const std::vector<value_type>& arg_types, value_type result) {
    const std::string name = op.name();
    instruction s{};
    s.type = result;
    const std::size_t arity = args.size();
    if (arity >= 1) s.a = static_cast<std::uint8_t>(args[0]);
    if (arity >= 2) s.b = static_cast<std::uint8_t>(args[1]);
    if (arity >= 3) s.c = static_cast<std::uint8_t>(args[2]);
    // Every op but where and convert computes in its first input's type.
    auto same_types = [&] {
        for (auto t : arg_types)
            if (t != arg_types[0]) return false;
        return true;
    };

    if (auto it = floating_unary_ops().find(name); it != floating_unary_ops().end()) {
        if (arity != 1 || !is_floating(arg_types[0]) || result != arg_types[0]) return std::nullopt;
        s.op = it->second;
        return s;
    }
    if (auto it = numeric_unary_ops().find(name); it != numeric_unary_ops().end()) {
        if (arity != 1 || result != arg_types[0] || arg_types[0] == value_type::boolean) return std::nullopt;
        s.op = is_floating(arg_types[0]) ? it->second.first : it->second.second;
        return s;
    }
    if (name == "gelu") {
        const auto* g = op.get_if<op::gelu>();
        if (g == nullptr || arity != 1 || !is_floating(arg_types[0]) || result != arg_types[0]) return std::nullopt;
        s.op = g->approximate == op::gelu_approximation::tanh ? opcode::f_gelu_tanh : opcode::f_gelu_erf;
        return s;
    }
    if (name == "not") {
        if (arity != 1 || arg_types[0] != value_type::boolean || result != value_type::boolean) return std::nullopt;
        s.op = opcode::b_not;
        return s;
    }
    if (name == "bitwise_not") {
        if (arity != 1 || !is_integer(arg_types[0]) || result != arg_types[0]) return std::nullopt;
        s.op = opcode::i_bitwise_not;
        return s;
    }
    if (auto it = numeric_binary_ops().find(name); it != numeric_binary_ops().end()) {
        if (arity != 2 || !same_types() || arg_types[0] == value_type::boolean) return std::nullopt;
        const bool comparison = name == "less" || name == "greater";
        if (result != (comparison ? value_type::boolean : arg_types[0])) return std::nullopt;
        s.op = is_floating(arg_types[0]) ? it->second.first : it->second.second;
        return s;
    }
    if (name == "equal") {  // any type, bool included (0 / 1 in the integer register)
        if (arity != 2 || !same_types() || result != value_type::boolean) return std::nullopt;
        s.op = is_floating(arg_types[0]) ? opcode::f_equal : opcode::i_equal;
        return s;
    }
    if (name == "mod") {
        const auto* m = op.get_if<op::mod>();
        if (m == nullptr || arity != 2 || !same_types() || arg_types[0] == value_type::boolean ||
            result != arg_types[0])
            return std::nullopt;
        if (is_floating(arg_types[0])) s.op = m->fmod ? opcode::f_fmod : opcode::f_mod;
        else s.op = m->fmod ? opcode::i_fmod : opcode::i_mod;
        return s;
    }
    if (name == "and" || name == "or" || name == "xor") {  // bool only: bitwise on 0 / 1 is logical
        if (arity != 2 || !same_types() || arg_types[0] != value_type::boolean || result != value_type::boolean)
            return std::nullopt;
        s.op = name == "and" ? opcode::i_and : name == "or" ? opcode::i_or : opcode::i_xor;
        return s;
    }
    if (name == "bitwise_and" || name == "bitwise_or" || name == "bitwise_xor") {
        if (arity != 2 || !same_types() || !is_integer(arg_types[0]) || result != arg_types[0]) return std::nullopt;
        s.op = name == "bitwise_and" ? opcode::i_and : name == "bitwise_or" ? opcode::i_or : opcode::i_xor;
        return s;
    }
    if (name == "bitshift") {
        const auto* b = op.get_if<op::bitshift>();
        if (b == nullptr || arity != 2 || !same_types() || !is_integer(arg_types[0]) || result != arg_types[0])
            return std::nullopt;
        s.op = b->direction == op::shift_direction::left ? opcode::i_shift_left : opcode::i_shift_right;
        s.aux = width_bits(arg_types[0]);
        return s;
    }
    if (name == "where") {
        if (arity != 3 || arg_types[0] != value_type::boolean || arg_types[1] != arg_types[2] ||
            result != arg_types[1])
            return std::nullopt;
        s.op = is_floating(result) ? opcode::f_where : opcode::i_where;
        return s;
    }
    if (name == "clip") {
        if (arity != 3 || !same_types() || arg_types[0] == value_type::boolean || result != arg_types[0])
            return std::nullopt;
        s.op = is_floating(result) ? opcode::f_clip : opcode::i_clip;
        return s;
    }
    if (name == "convert") {
        const auto* c = op.get_if<op::convert>();
        if (c == nullptr || arity != 1) return std::nullopt;
        const auto target = value_type_of(c->target_type);
        if (!target || *target != result) return std::nullopt;
        const value_type from = arg_types[0];
        if (is_floating(from)) {
            if (is_floating(result)) s.op = opcode::f_to_f;
            else if (result == value_type::boolean) s.op = opcode::f_to_b;
            else {
                s.op = opcode::f_to_i;
                s.aux = static_cast<std::uint8_t>(result);
            }
        } else {
            if (is_floating(result)) {
                s.op = opcode::i_to_f;
                s.aux = result == value_type::f64 ? 1 : 0;
            } else {
                s.op = result == value_type::boolean ? opcode::i_to_b : opcode::i_to_i;
            }
        }
        return s;
    }
    return std::nullopt;
}

// Input strides against the output's lens, numpy-aligned on the right; false where the input does not broadcast.
bool broadcast_strides(const shape& in, const std::vector<std::size_t>& out_lens, std::uint64_t* strides) {
    if (in.ndim() > out_lens.size()) return false;
    const std::size_t pad = out_lens.size() - in.ndim();
    for (std::size_t d = 0; d < out_lens.size(); ++d) strides[d] = 0;
    for (std::size_t i = 0; i < in.ndim(); ++i) {
        const std::size_t len = in.lens()[i];
        if (len == 1) continue;
        if (len != out_lens[pad + i]) return false;
        strides[pad + i] = in.strides()[i];
    }
    return true;
}

}  // namespace

std::optional<program> translate(const gpu_kernel_request& request) {
    const operation& op = request.op;
    const std::vector<shape>& inputs = request.input_shapes;
    const shape& output = request.output_shape;

    // The steps as (op, value numbers), and every value's shape.
    std::vector<op::pointwise_step> steps;
    std::vector<shape> value_shapes;
    if (const auto* fused = op.get_if<op::fused_pointwise>()) {
        steps = fused->steps;
        try {
            value_shapes = fused->value_shapes(inputs);
        } catch (const error&) {
            return std::nullopt;
        }
    } else if (op.is_pointwise()) {
        op::pointwise_step step;
        step.op = op;
        for (std::size_t k = 0; k < inputs.size(); ++k) step.args.push_back(k);
        steps.push_back(std::move(step));
        value_shapes = inputs;
        value_shapes.push_back(output);
    } else {
        return std::nullopt;
    }

    const std::size_t n = inputs.size();
    if (n == 0 || n > max_inputs || steps.empty() || n + steps.size() > max_values) return std::nullopt;
    if (output.ndim() > max_rank || !output.standard() || output.dynamic()) return std::nullopt;
    if (value_shapes.size() != n + steps.size() || value_shapes.back().lens() != output.lens() ||
        value_shapes.back().type() != output.type())
        return std::nullopt;

    program prog;
    prog.rank = static_cast<int>(output.ndim());
    prog.num_inputs = static_cast<int>(n);
    prog.num_steps = static_cast<int>(steps.size());
    prog.elements = output.elements();
    for (std::size_t d = 0; d < output.ndim(); ++d) prog.out_lens[d] = output.lens()[d];
    const auto out_type = value_type_of(output.type());
    if (!out_type) return std::nullopt;
    prog.output_type = *out_type;

    std::vector<value_type> types;
    for (const auto& s : value_shapes) {
        const auto t = value_type_of(s.type());
        if (!t) return std::nullopt;
        types.push_back(*t);
    }
    for (std::size_t k = 0; k < n; ++k) {
        if (inputs[k].dynamic() || !broadcast_strides(inputs[k], output.lens(), prog.in_strides[k]))
            return std::nullopt;
        prog.in_types[k] = types[k];
    }
    // As the reference computes such a program (fused_pointwise::compute_widened):
    // with a 16-bit float value anywhere, every value is float32 (a convert to
    // a 16-bit type still rounds to it), and the result is rounded once, when
    // it is stored. Inputs keep their memory type for the loads.
    auto is_16bit = [](value_type t) { return t == value_type::f16 || t == value_type::bf16; };
    const bool widened = std::any_of(types.begin(), types.end(), is_16bit);
    if (widened)
        for (std::size_t k = 0; k < n; ++k)
            if (is_16bit(types[k])) types[k] = value_type::f32;
    for (std::size_t k = 0; k < steps.size(); ++k) {
        std::vector<value_type> arg_types;
        for (auto a : steps[k].args) {
            if (a >= n + k) return std::nullopt;
            arg_types.push_back(types[a]);
        }
        if (arg_types.empty()) return std::nullopt;
        value_type result_type = types[n + k];
        if (widened && is_16bit(result_type) && steps[k].op.name() != "convert") result_type = value_type::f32;
        auto s = translate_step(steps[k].op, steps[k].args, arg_types, result_type);
        if (widened && is_16bit(types[n + k])) types[n + k] = value_type::f32;
        if (!s) return std::nullopt;
        s->dst = static_cast<std::uint8_t>(n + k);
        if (s->op == opcode::i_div || s->op == opcode::i_mod || s->op == opcode::i_fmod)
            prog.has_integer_division = true;
        prog.steps[k] = *s;
    }
    return prog;
}

}  // namespace kiln::pointwise
