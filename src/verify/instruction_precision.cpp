// What each instruction of a compiled program computes in (kiln/perf.hpp):
// what `kiln perf` and `kiln read` show beside each kernel.
#include <unordered_map>

#include "kiln/perf.hpp"

namespace kiln {

namespace {

bool is_bigger(dtype a, dtype b) {
    return dtype_size(a) > dtype_size(b);
}

// Scales and zero points (one value) say nothing about the arithmetic.
bool is_data(const shape& s) {
    return !s.is_tuple() && s.elements() > 1;
}

// Per-channel scales, zero points and biases of a quantized op: constant vectors.
bool is_per_channel_parameter(const instruction& in) { return in.is_literal() && in.get_shape().ndim() <= 1; }

// The inputs whose types decide the arithmetic: an int8 layer's product
// reads x and w; its epilogue's residual, even a float one, is added to the
// product's scaled sums after it.
std::vector<instruction_ref> product_inputs(const instruction& ins) {
    const std::string op = ins.name();
    if (op != "fused_quant_dot" && op != "fused_quant_convolution") return ins.inputs();
    return {ins.inputs().begin(), ins.inputs().begin() + 2};
}

std::string arithmetic_from_types(const instruction& ins) {
    const dtype result = ins.get_shape().is_tuple() ? dtype::float_type : ins.get_shape().type();
    bool all_integral = true;
    std::size_t data_inputs = 0;
    dtype widest_integer = dtype::int8_type;
    for (const auto& in : product_inputs(ins)) {
        const shape& s = in->get_shape();
        if (!is_data(s) || is_per_channel_parameter(*in)) continue;
        ++data_inputs;
        if (!is_integral(s.type())) {
            all_integral = false;
            break;
        }
        if (is_bigger(s.type(), widest_integer)) widest_integer = s.type();
    }
    // int8 data times int8 weights: integer arithmetic whatever the result type (a
    // dequantize_linear alone, one integer input to a float result, computes in float).
    if (data_inputs > 0 && all_integral && (data_inputs > 1 || is_integral(result)))
        return precision_name(widest_integer);

    bool any_float = is_floating(result);
    dtype widest_float = is_floating(result) ? result : dtype::half_type;
    for (const auto& in : ins.inputs()) {
        const shape& s = in->get_shape();
        if (in->is_literal() || s.is_tuple() || !is_floating(s.type())) continue;
        if (!any_float || is_bigger(s.type(), widest_float)) widest_float = s.type();
        any_float = true;
    }
    if (!any_float) return precision_name(result);
    std::string text = precision_name(widest_float);
    for (const auto& in : ins.inputs()) {
        const shape& s = in->get_shape();
        // Narrower weights: half-precision floats, or 8-bit integers (not, say, int32 indices).
        const bool weight_type = is_floating(s.type()) || dtype_size(s.type()) == 1;
        if (in->is_literal() && is_data(s) && weight_type && is_bigger(widest_float, s.type()))
            return text + " (" + precision_name(s.type()) + " weights)";
    }
    return text;
}

}  // namespace

std::string precision_name(dtype t) {
    switch (t) {
        case dtype::half_type:
            return "float16";
        case dtype::bf16_type:
            return "bfloat16";
        case dtype::float_type:
            return "float32";
        case dtype::double_type:
            return "float64";
        default:
            break;
    }
    std::string name = to_string(t);
    const std::string suffix = "_type";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        name.resize(name.size() - suffix.size());
    return name;
}

std::vector<instruction_precision> instruction_precisions(const program& p) {
    if (!p.is_compiled()) fail("instruction_precisions: the program must be compiled first");
    std::unordered_map<std::string, std::string> stated;
    for (const auto& c : p.kernel_choices())
        if (!c.arithmetic.empty()) stated[c.instruction] = c.arithmetic;
    const module& m = *p.get_main_module();
    const auto names = m.instruction_names();
    std::vector<instruction_precision> out;
    for (const auto& ins : m) {
        if (ins.is_param() || ins.is_literal() || ins.is_return()) continue;
        const std::string& name = names.at(&ins);
        auto it = stated.find(name);
        out.push_back({name, ins.name(), it != stated.end() ? it->second : arithmetic_from_types(ins),
                       ins.get_shape().is_tuple() ? "tuple" : precision_name(ins.get_shape().type())});
    }
    return out;
}

}  // namespace kiln
