// See cpu_passes.hpp. nn.Linear keeps its weight as [N, K] and computes
// x . W^T: the torch front end hands each product a transposed view of that
// literal (strides {1, K}), where an ONNX file holds a row-major [K, N]
// initializer. oneDNN (2.x) runs a product over such a view with its brgemm
// kernel reading it in place, and one over row-major weights with its jit
// gemm on a row-padded copy (dnnl_matmul.cpp), as for the ONNX file: the
// torch path of DistilBERT and BERT at batch 1 ran 9-16% slower than their
// ONNX files, these views being the only difference in the programs, while
// Kiln's few-row column loops (few_rows_columns_*, one to three rows here: a
// decode step) want exactly that [N, K] layout. The row count is known here, so the
// weights take the layout the product's algorithm reads: a row-major literal,
// made once, for the products that run in oneDNN; the [N, K] literal for the
// ones the column loops run.
#include <algorithm>
#include <vector>

#include "kiln/module.hpp"
#include "ops/fused_dot.hpp"
#include "passes/shared_derived_values.hpp"
#include "targets/cpu/kernels/matmul/matmul_algorithms.hpp"
#include "targets/cpu/kernels/narrow_weights/narrow_weights_algorithms.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

bool is_product(const instruction& ins) {
    return ins.name() == "fused_dot" || ins.name() == "dot";
}

// Whether the cpu target's first eligible matrix product algorithm for
// `product`, with `weights` (a view of a literal) as its input 1, is a column
// loop: it reads the weights as stored, [N, K]. A plain dot runs as a
// fused_dot without bias or post-ops (kernel_registry.cpp).
bool column_loop_reads(const instruction& product, instruction_ref weights, const argument& weight_values) {
    const operation op = product.name() == "dot" ? operation(op::fused_dot{}) : product.get_operator();
    const std::vector<shape> shapes = product.input_shapes();
    std::vector<argument> constants(shapes.size());
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        auto in = product.inputs()[i];
        if (in == weights)
            constants[i] = weight_values;
        else if (in->is_literal())
            constants[i] = in->get_literal().get_argument();
    }
    const kernel_request request{op, shapes, product.get_shape(), constants, 1};
    // At four rows the column loop's loads of the rows outnumber its weight
    // loads 4 to 1 and it falls behind the memory; the row-major streaming
    // loop (few_rows_float32_*) shares each weight load between the rows.
    // Llama's 32000 x 1024 output layer at four rows, two threads, Zen 4:
    // 19.4 GB/s against 30.9 (at three rows 33.7 against 30.7).
    constexpr std::size_t column_loop_falls_behind = 4;  // rows
    const std::size_t rows = shapes[0].elements() / std::max<std::size_t>(shapes[1].lens()[0], 1);
    if (rows >= column_loop_falls_behind) return false;
    for (const auto& algorithm : matmul_algorithms()) {
        if (!algorithm.eligible(request)) continue;
        return algorithm.name == few_rows_float32_columns_avx512_matmul.name ||
               algorithm.name == few_rows_float32_columns_matmul.name;
    }
    return false;
}

// Readers of a transposed view that want it row-major: products that read
// it as their weights (input 1) only, run by an algorithm other than the
// column loops.
bool read_row_major_only(instruction_ref view, const argument& view_values, bool for_every_extent) {
    if (view->outputs().empty()) return false;
    for (auto reader : view->outputs()) {
        if (!is_product(*reader)) return false;
        const auto& inputs = reader->inputs();
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (inputs[i] == view && i != 1) return false;
        if (!for_every_extent && column_loop_reads(*reader, view, view_values)) return false;
    }
    return true;
}

// A float32 literal that only transposes of one permutation read, and whose
// views only products read as row-major weights, is replaced by its
// transposed values, row-major. A literal any other reader needs as it is (a
// few-row product's column loop, a gather reading a tied embedding's rows)
// keeps its layout, and no second copy is made: such weights are stored once.
void lay_out_row_major(module& m, instruction_ref lit, bool for_every_extent) {
    const shape& s = lit->get_shape();
    if (s.type() != dtype::float_type || s.ndim() < 2 || s.elements() == 0 || lit->outputs().empty()) return;
    std::vector<instruction_ref> views;
    for (auto user : lit->outputs())
        if (std::find(views.begin(), views.end(), user) == views.end()) views.push_back(user);
    const operation& first = views.front()->get_operator();
    if (first.name() != "transpose") return;
    const argument stored = lit->get_literal().get_argument();
    if (stored.empty()) return;  // a loaded file's packed literal: no values to lay out
    // One transposed copy for every program optimised from this literal's bytes.
    const argument transposed = shared_derived_value(stored, to_string(first), [&] {
        return first.evaluate(views.front()->get_shape(), {stored}).contiguous();  // a transpose's value is a view
    });
    for (auto view : views) {
        if (view->get_operator() != first || view->inputs().size() != 1) return;
        if (!read_row_major_only(view, transposed, for_every_extent)) return;
    }
    auto row_major = m.insert_literal(lit, literal::sharing(transposed));
    for (auto view : views) {
        m.replace_all_uses(view, row_major);
        m.remove_instruction(view);
    }
    m.remove_instruction(lit);
}

}  // namespace

void row_major_product_weights::apply(module& m) const {
    std::vector<instruction_ref> literals;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->is_literal()) literals.push_back(ins);
    for (auto lit : literals) lay_out_row_major(m, lit, for_every_extent);
}

}  // namespace kiln
