#include "targets/cpu/lowering/batch_row_loop.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include "targets/cpu/lowering/kernel_registry.hpp"

namespace kiln {

namespace {

bool is_batch_row(const std::optional<varying_dimension>& v) {
    return v && v->dim == 0 && v->scale == 1 && v->offset == 0;
}

// Ops that compute each image (row of dimension 0) of their result from the
// same image of their inputs. A reduction over dimension 0 would leave a
// result that does not vary with the batch, which the caller refuses.
bool image_by_image(std::string_view name) {
    constexpr std::array<std::string_view, 10> ops{"convolution", "fused_convolution", "pooling",
                                                   "reduce_mean", "reduce_sum",        "reduce_max",
                                                   "reduce_min",  "to_blocked",        "from_blocked",
                                                   "fused_dot"};
    return std::find(ops.begin(), ops.end(), name) != ops.end() || name == "dot";
}

shape with_one_row(const shape& s) {
    auto lens = s.lens();
    lens.at(0) = 1;
    return shape(s.type(), std::move(lens), s.strides());
}

argument row_of(const argument& a, std::size_t row) {
    const shape& s = a.get_shape();
    return argument(with_one_row(s), a.data() + row * s.strides().at(0) * s.element_size());
}

}  // namespace

bool runs_by_batch_rows(const operation& op, const std::optional<varying_dimension>& out,
                        const std::vector<std::optional<varying_dimension>>& ins) {
    if (!image_by_image(op.name()) || !is_batch_row(out)) return false;
    for (std::size_t i = 0; i < ins.size(); ++i) {
        if (!ins[i]) continue;
        if (!is_batch_row(ins[i])) return false;
        // A product's weights (input 1) may vary with the batch only as a
        // batch of matrices, not as the rows of one.
        if ((op.name() == "fused_dot" || op.name() == "dot") && i == 1 && !is_batch_row(ins[0])) return false;
    }
    if ((op.name() == "fused_dot" || op.name() == "dot") && !is_batch_row(ins.at(0))) return false;
    return true;
}

std::shared_ptr<const cpu_kernel> make_batch_row_kernel(
    const operation& op, const std::vector<shape>& input_shapes, const shape& output_shape,
    const std::vector<bool>& varies, const std::vector<argument>& constants, int threads,
    const std::vector<std::shared_ptr<const packed_constant>>* packed) {
    std::vector<shape> row_inputs = input_shapes;
    for (std::size_t i = 0; i < row_inputs.size(); ++i)
        if (varies[i]) row_inputs[i] = with_one_row(row_inputs[i]);
    const shape row_output = with_one_row(output_shape);
    const kernel_request request{op, row_inputs, row_output, constants, threads, packed};
    // The algorithm a static compile at batch 1 picks (the full batch's may
    // not suit one row: MobileNetV2 ran 1.2x slower with it).
    return make_cpu_kernel(request).kernel;
}

void run_batch_rows(const cpu_kernel& row_kernel, const argument& result, const std::vector<argument>& inputs,
                    const std::vector<bool>& varies, std::byte* scratch) {
    std::vector<argument> row_inputs = inputs;
    const std::size_t rows = result.get_shape().lens().at(0);
    for (std::size_t n = 0; n < rows; ++n) {
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (varies[i]) row_inputs[i] = row_of(inputs[i], n);
        row_kernel.run(row_of(result, n), row_inputs, scratch);
    }
}

}  // namespace kiln
