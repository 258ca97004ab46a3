// See cpu_passes.hpp. A DenseNet block's input (the stem's pooled features,
// a transition's average pool) is float32 NCHW, and every dense layer of the
// block reads it as piece 0 of its channels-last fused_concat_pointwise: each
// of them gathered its channels one strided float at a time (4M floats per
// DenseNet-121 image, the block's whole input once per layer). Copied once
// into channels-last order, every layer reads whole rows of channels.
#include <algorithm>
#include <vector>

#include "kiln/module.hpp"
#include "ops/fused_concat_pointwise.hpp"
#include "ops/shape_ops.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

// Readers that gain from a channels-last copy of a value: channels-last
// programs that read it as a concatenated piece, and only so.
bool reads_as_piece_only(const instruction& reader, instruction_ref value) {
    const auto* c = reader.get_operator().get_if<op::fused_concat_pointwise>();
    if (c == nullptr || !c->channels_last) return false;
    const auto& inputs = reader.inputs();
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i] == value && i >= static_cast<std::size_t>(c->pieces)) return false;
    return true;
}

bool kernel_takes(const instruction& reader, instruction_ref value, const shape& replacement) {
    std::vector<shape> shapes;
    for (auto in : reader.inputs()) shapes.push_back(in == value ? replacement : in->get_shape());
    const std::vector<argument> constants(shapes.size());
    return make_concat_pointwise_kernel({reader.get_operator(), shapes, reader.get_shape(), constants, 1}) != nullptr;
}

void copy_channels_last(module& m, instruction_ref value) {
    const shape& s = value->get_shape();
    if (s.type() != dtype::float_type || s.ndim() != 4 || s.strides()[1] == 1 || s.lens()[1] == 1) return;
    std::vector<instruction_ref> readers;
    for (auto user : value->outputs())
        if (std::find(readers.begin(), readers.end(), user) == readers.end() && reads_as_piece_only(*user, value))
            readers.push_back(user);
    // One reader gathers the channels once either way.
    if (readers.size() < 2) return;
    op::transpose to_nhwc, to_nchw;
    to_nhwc.permutation = {0, 2, 3, 1};
    to_nchw.permutation = {0, 3, 1, 2};
    const auto after = std::next(value);
    const auto pixels_first = m.insert_instruction(after, operation(to_nhwc), {value});
    const auto copied = m.insert_instruction(after, operation(op::contiguous{}), {pixels_first});
    const auto viewed = m.insert_instruction(after, operation(to_nchw), {copied});
    bool used = false;
    for (auto reader : readers) {
        if (!kernel_takes(*reader, value, viewed->get_shape())) continue;
        auto inputs = reader->inputs();
        std::replace(inputs.begin(), inputs.end(), value, viewed);
        m.replace_instruction(reader, reader->get_operator(), inputs);
        used = true;
    }
    if (!used) {
        m.remove_instruction(viewed);
        m.remove_instruction(copied);
        m.remove_instruction(pixels_first);
    }
}

}  // namespace

void channels_last_concat_pieces::apply(module& m) const {
    std::vector<instruction_ref> values;
    for (auto ins = m.begin(); ins != m.end(); ++ins) values.push_back(ins);
    for (auto value : values) copy_channels_last(m, value);
}

}  // namespace kiln
