#include "targets/cpu/lowering/batch_row_loop.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

#include "targets/cpu/lowering/kernel_registry.hpp"

namespace kiln {

namespace {

// `rows` rows per unit of the extent (a batch, or a batch folded with the
// rows of each of its entries: [batch * seq, 768]) in a dimension of `s`
// that only dimensions of length 1 precede; dimension 0 unless
// `any_outer_dim`.
bool is_batch_row(const std::optional<varying_dimension>& v, std::int64_t rows, const shape& s, bool any_outer_dim) {
    if (!v || v->scale != rows || v->offset != 0 || v->dim >= s.ndim()) return false;
    if (v->dim > 0 && !any_outer_dim) return false;
    for (std::size_t d = 0; d < v->dim; ++d)
        if (s.lens()[d] != 1) return false;
    return true;
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

shape with_rows(const shape& s, std::size_t dim, std::size_t rows) {
    auto lens = s.lens();
    lens.at(dim) = rows;
    return shape(s.type(), std::move(lens), s.strides());
}

// Rows [first, first + count) of dimension `dim` of `a`.
argument rows_of(const argument& a, std::size_t dim, std::size_t first, std::size_t count) {
    const shape& s = a.get_shape();
    return argument(with_rows(s, dim, count), a.data() + first * s.strides().at(dim) * s.element_size());
}

}  // namespace

std::size_t rows_per_batch_entry(const operation& op, const std::optional<varying_dimension>& out,
                                 const std::vector<std::optional<varying_dimension>>& ins, const shape& out_shape,
                                 const std::vector<shape>& in_shapes) {
    if (!image_by_image(op.name()) || !out || out->scale < 1 || ins.size() != in_shapes.size()) return 0;
    const std::int64_t rows = out->scale;
    const bool product = op.name() == "fused_dot" || op.name() == "dot";
    // A product's rows (not its columns) of any dimension before the matrices' last two.
    auto is_row = [&](const std::optional<varying_dimension>& v, const shape& s) {
        return is_batch_row(v, rows, s, product) && (!product || v->dim + 2 <= std::max<std::size_t>(s.ndim(), 2));
    };
    if (!is_row(out, out_shape)) return 0;
    for (std::size_t i = 0; i < ins.size(); ++i) {
        if (!ins[i]) continue;
        if (!is_row(ins[i], in_shapes[i])) return 0;
        // A product's weights (input 1) may vary with the batch only as a
        // batch of matrices, not as the rows of one.
        if (product && i == 1 && (rows != 1 || ins[i]->dim != 0 || !is_row(ins[0], in_shapes[0]))) return 0;
    }
    if (product && !is_row(ins.at(0), in_shapes.at(0))) return 0;
    return static_cast<std::size_t>(rows);
}

std::shared_ptr<const cpu_kernel> make_batch_row_kernel(
    const operation& op, const std::vector<shape>& input_shapes, const shape& output_shape,
    const std::vector<row_dimension>& input_rows, std::size_t output_rows, std::size_t rows,
    const std::vector<argument>& constants, int threads,
    const std::vector<std::shared_ptr<const packed_constant>>* packed) {
    std::vector<shape> row_inputs = input_shapes;
    for (std::size_t i = 0; i < row_inputs.size(); ++i)
        if (input_rows[i]) row_inputs[i] = with_rows(row_inputs[i], *input_rows[i], rows);
    const shape row_output = with_rows(output_shape, output_rows, rows);
    const kernel_request request{op, row_inputs, row_output, constants, threads, packed};
    // The algorithm a static compile at batch 1 picks (the full batch's may
    // not suit one row: MobileNetV2 ran 1.2x slower with it).
    return make_cpu_kernel(request).kernel;
}

void run_rows(const cpu_kernel& kernel, const argument& result, const std::vector<argument>& inputs,
              const std::vector<row_dimension>& input_rows, std::size_t output_rows, std::size_t first,
              std::size_t count, std::byte* scratch) {
    std::vector<argument> block_inputs = inputs;
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (input_rows[i]) block_inputs[i] = rows_of(inputs[i], *input_rows[i], first, count);
    kernel.run(rows_of(result, output_rows, first, count), block_inputs, scratch);
}

}  // namespace kiln
