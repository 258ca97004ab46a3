// See cpu_passes.hpp. The concat becomes value 0 of the program; the
// fused_pointwise's other inputs keep their order after the concat's pieces.
#include <algorithm>
#include <optional>
#include <vector>

#include "kiln/module.hpp"
#include "ops/fused_concat_pointwise.hpp"
#include "ops/fused_quantized_linalg.hpp"
#include "ops/quant.hpp"
#include "ops/shape_ops.hpp"
#include "passes/constant_value.hpp"
#include "passes/matcher.hpp"
#include "passes/rewriter.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

// The input of `ins` that is a concat read by it alone, once; or inputs().size().
std::size_t lone_concat_input(const instruction& ins) {
    const auto& inputs = ins.inputs();
    for (std::size_t q = 0; q < inputs.size(); ++q) {
        const auto& c = *inputs[q];
        if (c.get_operator().name() != "concat" || c.outputs().size() != 1) continue;
        if (std::count(inputs.begin(), inputs.end(), inputs[q]) != 1) continue;
        return q;
    }
    return inputs.size();
}

std::vector<shape> shapes_of(const std::vector<instruction_ref>& inputs) {
    std::vector<shape> shapes;
    for (auto i : inputs) shapes.push_back(i->get_shape());
    return shapes;
}

// The kernel the cpu target would build, with no constant inputs known
// (the inputs' shapes, or `shapes` when given).
bool kernel_runs(const operation& op, const std::vector<instruction_ref>& inputs, const shape& out,
                 std::vector<shape> shapes = {}) {
    if (shapes.empty()) shapes = shapes_of(inputs);
    const std::vector<argument> constants(inputs.size());
    return make_concat_pointwise_kernel({op, shapes, out, constants, 1}) != nullptr;
}

// quantize_linear(fused_concat_pointwise read by it alone), per tensor with
// constant parameters, as the fused op with a quantized result; false
// where it stays as it was.
bool fold_quantize(module& m, instruction_ref quantize) {
    const auto& in = quantize->inputs();
    if (in.size() != 3 || in[0]->name() != "fused_concat_pointwise" || in[0]->outputs().size() != 1) return false;
    const auto* fused = in[0]->get_operator().get_if<op::fused_concat_pointwise>();
    const dtype t = quantize->get_shape().type();
    if (fused->quantized() || !op::is_8bit_integer(t) || in[1]->get_shape().type() != dtype::float_type) return false;
    if (in[1]->get_shape().elements() != 1 || in[2]->get_shape().elements() != 1) return false;
    if (!match::is_constant_instruction(*in[1]) || !match::is_constant_instruction(*in[2])) return false;
    const auto scale = scalar_constant(*in[1]);
    const auto zero_point = scalar_constant(*in[2]);
    if (!scale || !(*scale > 0) || !zero_point) return false;
    op::fused_concat_pointwise quantized = *fused;
    quantized.output_type = t;
    quantized.output_scale = *scale;
    quantized.output_zero_point = static_cast<std::int64_t>(*zero_point);
    // Channels-last codes where the kernel writes them: what the int8
    // convolution after it reads, with no reorder.
    auto channels_last = quantized;
    channels_last.channels_last = true;
    const auto joined = in[0];
    for (const auto& candidate : {channels_last, quantized}) {
        if (candidate.channels_last && (quantize->get_shape().ndim() != 4 || (candidate.axis != 1 && candidate.axis != -3)))
            continue;
        const operation op(candidate);
        const auto inputs = joined->inputs();
        if (!kernel_runs(op, inputs, op.compute_shape(shapes_of(inputs)))) continue;
        const auto fused_codes = m.insert_instruction(quantize, op, inputs);
        const bool replaced = candidate.channels_last ? replace_value_restrided(m, quantize, fused_codes)
                                                      : replace_value(m, quantize, fused_codes);
        if (!replaced) {
            m.remove_instruction(fused_codes);
            continue;
        }
        m.remove_instruction(quantize);
        m.remove_instruction(joined);
        return true;
    }
    return false;
}

// The program's steps with input q as value 0 and the inputs before it moved
// up one (the fused op's pieces come first, then the program's other inputs).
std::vector<op::pointwise_step> with_value_zero(std::vector<op::pointwise_step> steps, std::size_t q) {
    for (auto& step : steps)
        for (auto& a : step.args)
            if (a == q)
                a = 0;
            else if (a < q)
                a += 1;  // later inputs and the steps' results keep their numbers
    return steps;
}

// The steps of a fused_pointwise, or of a single elementwise op as a program of one step.
std::optional<std::vector<op::pointwise_step>> program_steps(const instruction& ins) {
    if (const auto* program = ins.get_operator().get_if<op::fused_pointwise>()) return program->steps;
    if (!ins.get_operator().is_pointwise()) return std::nullopt;
    op::pointwise_step single{ins.get_operator(), {}};
    for (std::size_t i = 0; i < ins.inputs().size(); ++i) single.args.push_back(i);
    return std::vector<op::pointwise_step>{std::move(single)};
}

// A 4-D program over one feature map, read only by a per-tensor
// quantize_linear (DenseNet's batch norm + ReLU of a transition's pooled
// features, or of the stem's, before the next int8 convolution): a
// fused_concat_pointwise of that one piece, so that fold_quantize makes it
// write channels-last codes in one pass. As a program it wrote NCHW float32,
// the quantize read that, and the convolution reordered the codes. Left as
// it was where the codes could not be folded in.
void quantized_feature_map_program(module& m, instruction_ref quantize) {
    const auto ins = quantize->inputs().front();
    const shape& out = ins->get_shape();
    if (out.ndim() != 4 || out.type() != dtype::float_type || ins->outputs().size() != 1) return;
    const auto steps = program_steps(*ins);
    if (!steps) return;
    const auto& inputs = ins->inputs();
    std::size_t q = inputs.size();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i]->get_shape().lens() != out.lens()) continue;
        if (q != inputs.size()) return;  // two feature maps
        q = i;
    }
    if (q == inputs.size()) return;
    op::fused_concat_pointwise fused;
    fused.axis = 1;
    fused.pieces = 1;
    fused.steps = with_value_zero(*steps, q);
    std::vector<instruction_ref> pieces_then_operands{inputs[q]};
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (i != q) pieces_then_operands.push_back(inputs[i]);
    const operation original = ins->get_operator();
    const auto original_inputs = inputs;
    m.replace_instruction(ins, operation(fused), pieces_then_operands);
    if (!fold_quantize(m, quantize)) m.replace_instruction(ins, original, original_inputs);
}

// A float32 result that only spatial reductions read (DenseNet's last
// batch norm + ReLU before its global average pool) is stored channels-last
// where the cpu reduce kernels read that layout: the block's new features
// then have only channels-last readers, so they are stored as codes too
// (coded_features), and the result's rows are written whole.
void float_result_channels_last(module& m, instruction_ref fused) {
    const auto* f = fused->get_operator().get_if<op::fused_concat_pointwise>();
    if (f == nullptr || f->channels_last || f->quantized() || fused->get_shape().ndim() != 4 ||
        (f->axis != 1 && f->axis != -3) || fused->outputs().empty())
        return;
    auto changed = *f;
    changed.channels_last = true;
    const operation op(changed);
    const auto inputs = fused->inputs();
    const shape result = op.compute_shape(shapes_of(inputs));
    for (auto reader : fused->outputs()) {
        const std::string n = reader->name();
        if (n != "reduce_mean" && n != "reduce_sum" && n != "reduce_max" && n != "reduce_min") return;
        if (reader->inputs().size() != 1) return;
        const std::vector<argument> constants(1);
        if (make_reduce_kernel({reader->get_operator(), {result}, reader->get_shape(), constants, 1}) == nullptr) return;
    }
    if (!kernel_runs(op, inputs, result)) return;
    const auto restrided = m.insert_instruction(fused, op, inputs);
    if (!replace_value_restrided(m, fused, restrided)) {
        m.remove_instruction(restrided);
        return;
    }
    m.remove_instruction(fused);
}

// An int8 convolution with a float result that only channels-last
// fused_concat_pointwise ops read (DenseNet's new features, read by every
// later layer of the block) stores it channels-last too, as its kernel
// computes it: no reorder on either side.
void float_features_channels_last(module& m, instruction_ref conv) {
    const auto* f = conv->get_operator().get_if<op::fused_quant_convolution>();
    if (f == nullptr || f->channels_last || conv->get_shape().type() != dtype::float_type || conv->get_shape().ndim() != 4 ||
        conv->outputs().empty())
        return;
    for (auto user : conv->outputs()) {
        const auto* c = user->get_operator().get_if<op::fused_concat_pointwise>();
        if (c == nullptr || !c->channels_last) return;
    }
    auto changed = *f;
    changed.channels_last = true;
    const operation op(changed);
    const shape features = op.compute_shape(shapes_of(conv->inputs()));
    for (auto user : conv->outputs()) {
        auto shapes = shapes_of(user->inputs());
        for (std::size_t i = 0; i < shapes.size(); ++i)
            if (user->inputs()[i] == conv) shapes[i] = features;
        if (!kernel_runs(user->get_operator(), user->inputs(), user->get_shape(), shapes)) return;
    }
    const auto restrided = m.insert_instruction(conv, op, conv->inputs());
    if (!replace_value_restrided(m, conv, restrided)) {
        m.remove_instruction(restrided);
        return;
    }
    m.remove_instruction(conv);
}

// An int8 convolution whose float result is its codes dequantized (the
// QDQ graph's quantize -> dequantize, fused as a rounding) and that only
// channels-last fused_concat_pointwise ops read as pieces (DenseNet's new
// features, read by the concat of every later layer of the block) stores
// the codes instead, which those ops dequantize as they read them: a
// quarter of the bytes written once and read by every later layer. The
// values the programs see are the same float32 numbers, (code - z) * s.
void coded_features(module& m, instruction_ref conv) {
    const auto* f = conv->get_operator().get_if<op::fused_quant_convolution>();
    if (f == nullptr || conv->get_shape().ndim() != 4 || conv->outputs().empty()) return;
    const auto& e = f->epilogue;
    if (e.output_type != dtype::float_type || !op::is_8bit_integer(e.round_type) ||
        e.residual != op::residual_kind::none || !e.after_residual.kinds.empty())
        return;
    auto changed = *f;
    changed.channels_last = true;
    changed.epilogue.output_type = e.round_type;
    changed.epilogue.output_scale = e.round_scale;
    changed.epilogue.output_zero_point = e.round_zero_point;
    changed.epilogue.round_type = dtype::float_type;
    changed.epilogue.round_scale = 1;
    changed.epilogue.round_zero_point = 0;
    const operation conv_op(changed);
    const shape codes = conv_op.compute_shape(shapes_of(conv->inputs()));
    std::vector<std::pair<instruction_ref, operation>> readers;
    for (auto user : conv->outputs()) {
        if (std::any_of(readers.begin(), readers.end(), [&](const auto& rd) { return rd.first == user; })) continue;
        const auto* c = user->get_operator().get_if<op::fused_concat_pointwise>();
        if (c == nullptr || !c->channels_last) return;
        auto coded = *c;
        const auto pieces = static_cast<std::size_t>(c->pieces);
        coded.piece_scales.resize(pieces, 1);
        coded.piece_zero_points.resize(pieces, 0);
        auto shapes = shapes_of(user->inputs());
        for (std::size_t i = 0; i < shapes.size(); ++i) {
            if (user->inputs()[i] != conv) continue;
            if (i >= pieces) return;  // read by the program as an operand, not as a piece
            shapes[i] = codes;
            coded.piece_scales[i] = e.round_scale;
            coded.piece_zero_points[i] = e.round_zero_point;
        }
        const operation op(coded);
        if (!kernel_runs(op, user->inputs(), user->get_shape(), shapes)) return;
        readers.emplace_back(user, op);
    }
    const auto stored = m.insert_instruction(conv, conv_op, conv->inputs());
    for (auto& [user, op] : readers) {
        auto inputs = user->inputs();
        std::replace(inputs.begin(), inputs.end(), conv, stored);
        m.replace_instruction(user, op, inputs);
    }
    m.remove_instruction(conv);
}

}  // namespace

void fuse_concat_pointwise::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        auto steps = program_steps(*ins);
        if (!steps) continue;
        const std::size_t q = lone_concat_input(*ins);
        if (q == ins->inputs().size()) continue;
        const auto joined = ins->inputs()[q];
        if (joined->get_shape().lens() != ins->get_shape().lens()) continue;

        op::fused_concat_pointwise fused;
        fused.axis = joined->get_operator().get_if<op::concat>()->axis;
        fused.pieces = static_cast<std::int64_t>(joined->inputs().size());
        fused.steps = with_value_zero(std::move(*steps), q);
        std::vector<instruction_ref> inputs = joined->inputs();
        for (std::size_t i = 0; i < ins->inputs().size(); ++i)
            if (i != q) inputs.push_back(ins->inputs()[i]);
        const operation op(fused);
        if (!kernel_runs(op, inputs, ins->get_shape())) continue;
        m.replace_instruction(ins, op, inputs);
        m.remove_instruction(joined);
    }
    // Each visit may remove the instruction it is at (and earlier ones): the next one is found first.
    for (auto ins = m.begin(); ins != m.end();) {
        const auto current = ins++;
        if (current->name() == "quantize_linear" && !fold_quantize(m, current))
            quantized_feature_map_program(m, current);
    }
    for (auto ins = m.begin(); ins != m.end();) {
        const auto current = ins++;
        if (current->name() == "fused_concat_pointwise") float_result_channels_last(m, current);
    }
    for (auto ins = m.begin(); ins != m.end();) {
        const auto current = ins++;
        if (current->name() == "fused_quant_convolution") float_features_channels_last(m, current);
    }
    for (auto ins = m.begin(); ins != m.end();) {
        const auto current = ins++;
        if (current->name() == "fused_quant_convolution") coded_features(m, current);
    }
}

}  // namespace kiln
