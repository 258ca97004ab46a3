#include "quantize/bias_correction.hpp"

#include <algorithm>
#include <unordered_map>

#include "kiln/op_registry.hpp"
#include "ops/conv.hpp"
#include "passes/matcher.hpp"

namespace kiln {

namespace {

// Every element in row-major order, as doubles (weights run to millions of
// elements: one pass over the data, not value_at's per-element indexing).
std::vector<double> values_of(const argument& a) {
    const argument standard = a.get_shape().standard() ? a : a.contiguous();
    std::vector<double> v(standard.get_shape().elements());
    bool read = false;
    visit_type(standard.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            const T* data = standard.data_as<const T>();
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<float>(data[i]));
            read = true;
        }
    });
    if (!read) fail("bias correction: expected float values, got " + to_string(standard.get_shape().type()));
    return v;
}

std::size_t at_or(const std::vector<std::int64_t>& values, std::size_t i, std::int64_t fallback) {
    return static_cast<std::size_t>(i < values.size() ? values[i] : fallback);
}

// For each kernel offset along one spatial dim, the share of output
// positions whose tap at that offset reads inside the input (not padding).
std::vector<double> tap_shares(std::size_t in, std::size_t out, std::size_t kernel, std::size_t stride,
                               std::size_t dilation, std::size_t pad_begin) {
    std::vector<double> shares(kernel, 0);
    if (out == 0) return shares;
    for (std::size_t k = 0; k < kernel; ++k) {
        std::size_t inside = 0;
        for (std::size_t p = 0; p < out; ++p) {
            const std::size_t reach = p * stride + k * dilation;  // the input position plus pad_begin
            inside += reach >= pad_begin && reach - pad_begin < in;
        }
        shares[k] = static_cast<double>(inside) / static_cast<double>(out);
    }
    return shares;
}

// (W_q - W) E[x] per output channel of a convolution; `dw` is W_q - W.
std::vector<double> convolution_shift(const op::convolution& conv, const shape& x, const shape& y, const shape& w,
                                      const std::vector<double>& dw, const std::vector<double>& means) {
    const std::size_t outputs = w.lens()[0], per_group = w.lens()[1], spatial = w.ndim() - 2;
    const std::size_t groups = static_cast<std::size_t>(std::max<std::int64_t>(conv.group, 1));
    const std::size_t outputs_per_group = outputs / groups;
    // Weight of each flattened kernel position: the product of its taps' shares.
    std::vector<double> taps{1.0};
    for (std::size_t d = 0; d < spatial; ++d) {
        const std::vector<double> shares =
            tap_shares(x.lens()[2 + d], y.lens()[2 + d], w.lens()[2 + d], at_or(conv.stride, d, 1),
                       at_or(conv.dilation, d, 1), at_or(conv.padding, d, 0));
        std::vector<double> next;
        next.reserve(taps.size() * shares.size());
        for (double t : taps)
            for (double s : shares) next.push_back(t * s);
        taps = std::move(next);
    }
    std::vector<double> shift(outputs, 0);
    for (std::size_t o = 0; o < outputs; ++o) {
        const std::size_t first_channel = (o / outputs_per_group) * per_group;
        double sum = 0;
        for (std::size_t j = 0; j < per_group; ++j) {
            const double* row = dw.data() + (o * per_group + j) * taps.size();
            double tapped = 0;
            for (std::size_t t = 0; t < taps.size(); ++t) tapped += row[t] * taps[t];
            sum += tapped * means[first_channel + j];
        }
        shift[o] = sum;
    }
    return shift;
}

// (W_q - W) E[x] per output column of x [..., K] . W [K, N].
std::vector<double> dot_shift(const shape& w, const std::vector<double>& dw, const std::vector<double>& means) {
    const std::size_t rows = w.lens()[0], columns = w.lens()[1];
    std::vector<double> shift(columns, 0);
    for (std::size_t k = 0; k < rows; ++k)
        for (std::size_t n = 0; n < columns; ++n) shift[n] += dw[k * columns + n] * means[k];
    return shift;
}

// Whether constant shape `b`, broadcast onto `y`, holds one value per index
// of y's `axis` and nothing else.
bool per_channel_constant(const shape& b, const shape& y, std::size_t axis) {
    if (b.ndim() > y.ndim() || b.ndim() + axis < y.ndim()) return false;
    const std::size_t at = axis - (y.ndim() - b.ndim());
    for (std::size_t d = 0; d < b.ndim(); ++d)
        if (b.lens()[d] != (d == at ? y.lens()[axis] : 1)) return false;
    return true;
}

// Adds `delta` (one value per index of `axis`) to op's result.
void add_to_result(module& m, instruction_ref op, std::size_t axis, const std::vector<double>& delta) {
    const shape& y = op->get_shape();
    if (op->outputs().size() == 1) {
        instruction_ref user = op->outputs()[0];
        if (user->name() == "add" && user->inputs().size() == 2 && user->inputs()[0] != user->inputs()[1]) {
            instruction_ref bias = user->inputs()[user->inputs()[0] == op ? 1 : 0];
            if (match::is_constant_instruction(*bias) && bias->get_shape().type() == y.type() &&
                per_channel_constant(bias->get_shape(), y, axis)) {
                std::vector<double> values = values_of(evaluate_constant(*bias));
                for (std::size_t c = 0; c < values.size(); ++c) values[c] += delta[c];
                m.replace_input(user, bias,
                                m.insert_literal(user, literal(shape{y.type(), bias->get_shape().lens()}, values)));
                return;
            }
        }
    }
    std::vector<std::size_t> lens(y.ndim() - axis, 1);
    lens[0] = delta.size();
    std::vector<instruction_ref> users = op->outputs();
    std::sort(users.begin(), users.end(), [](auto a, auto b) { return &*a < &*b; });
    users.erase(std::unique(users.begin(), users.end()), users.end());
    const instruction_ref after = std::next(op);
    instruction_ref shifted = m.insert_instruction(
        after, make_op("add"), {op, m.insert_literal(after, literal(shape{y.type(), lens}, delta))});
    for (instruction_ref user : users) m.replace_input(user, op, shifted);
}

}  // namespace

std::vector<bias_correction_site> plan_bias_corrections(const std::vector<quantized_value>& planned,
                                                        const std::vector<instruction_ref>& activations,
                                                        std::vector<std::int64_t>& channel_axes) {
    std::unordered_map<const instruction*, std::size_t> activation_of;
    for (std::size_t k = 0; k < activations.size(); ++k) activation_of.emplace(&*activations[k], k);
    std::vector<bias_correction_site> sites;
    for (const auto& v : planned) {
        if (!v.is_weight) continue;
        for (const auto& [op, index] : v.uses) {
            if (index != 1 || op->inputs().size() != 2) continue;
            const shape& x = op->inputs()[0]->get_shape();
            const shape& w = v.value->get_shape();
            std::int64_t axis = -1;
            if (op->name() == "convolution" && x.ndim() >= 3 && w.ndim() == x.ndim()) axis = 1;
            if (op->name() == "dot" && x.ndim() >= 2 && w.ndim() == 2) axis = static_cast<std::int64_t>(x.ndim()) - 1;
            auto found = activation_of.find(&*op->inputs()[0]);
            if (axis < 0 || found == activation_of.end()) continue;
            std::int64_t& wanted = channel_axes.at(found->second);
            if (wanted >= 0 && wanted != axis) continue;
            wanted = axis;
            sites.push_back({op, found->second});
        }
    }
    return sites;
}

void correct_weight_rounding_bias(module& m, const bias_correction_site& site, const std::vector<double>& input_means) {
    instruction_ref op = site.op;
    instruction_ref dequantized = op->inputs()[1];
    if (dequantized->name() != "dequantize_linear" || dequantized->inputs()[0]->name() != "quantize_linear") return;
    const argument rounded = evaluate_constant(*dequantized);
    const argument exact = evaluate_constant(*dequantized->inputs()[0]->inputs()[0]);
    std::vector<double> dw = values_of(rounded);
    const std::vector<double> w = values_of(exact);
    for (std::size_t i = 0; i < dw.size(); ++i) dw[i] -= w[i];
    const shape& ws = exact.get_shape();
    const shape& x = op->inputs()[0]->get_shape();
    std::vector<double> shift;
    std::size_t axis = 0;
    if (const auto* conv = op->get_operator().get_if<op::convolution>()) {
        if (input_means.size() != x.lens()[1]) return;
        shift = convolution_shift(*conv, x, op->get_shape(), ws, dw, input_means);
        axis = 1;
    } else {
        if (input_means.size() != ws.lens()[0]) return;
        shift = dot_shift(ws, dw, input_means);
        axis = op->get_shape().ndim() - 1;
    }
    for (double& s : shift) s = -s;
    add_to_result(m, op, axis, shift);
}

}  // namespace kiln
