// See cpu_passes.hpp. nn.Linear keeps its weight as [N, K] and computes
// x . W^T: the torch front end hands each product a transposed view of that
// literal (strides {1, K}), where an ONNX file (or GPT-2's Conv1D) holds a
// row-major [K, N] one. oneDNN (2.x) runs a product over such a view with its
// brgemm kernel reading it in place, and one over row-major weights with its
// jit gemm on a row-padded copy (dnnl_matmul.cpp), as for the ONNX file: the
// torch path of DistilBERT and BERT at batch 1 ran 9-16% slower than their
// ONNX files, these views being the only difference in the programs. Kiln's
// column loop (few_rows_columns_*: a decode step's single row) wants the
// [N, K] layout, and its streaming loop (few_rows_float32_*, a few rows) and
// oneDNN the row-major one. The row count is known here, so the weights take
// the layout the product's algorithm reads, made once, in either direction.
#include <algorithm>
#include <vector>

#include "kiln/module.hpp"
#include "ops/fused_dot.hpp"
#include "ops/shape_ops.hpp"
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
// `product`, with `weight_values` (their shape and values) as its input 1
// (which is `weights` now), is a column loop: it reads the weights as
// [N, K]. A plain dot runs as a fused_dot without bias or post-ops
// (kernel_registry.cpp).
bool column_loop_reads(const instruction& product, instruction_ref weights, const argument& weight_values,
                       bool within_a_range) {
    const operation op = product.name() == "dot" ? operation(op::fused_dot{}) : product.get_operator();
    std::vector<shape> shapes = product.input_shapes();
    std::vector<argument> constants(shapes.size());
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        auto in = product.inputs()[i];
        if (in == weights) {
            constants[i] = weight_values;
            shapes[i] = weight_values.get_shape();
        } else if (in->is_literal()) {
            constants[i] = in->get_literal().get_argument();
        }
    }
    const kernel_request request{op, shapes, product.get_shape(), constants, 1};
    // From two rows on, the column loop's loads of the rows outnumber its
    // weight loads and it falls behind the memory; the row-major streaming
    // loop (few_rows_float32_*) shares each weight load between the rows. At
    // one row the column loop, which prefetches ahead across its columns'
    // pages, is the faster. Two threads, Zen 4 VM, interleaved rounds, time
    // of the column loop over the streaming loop's: one row 0.80x on GPT-2's
    // products (12 layers), 0.81x on Llama's (8 layers of hidden 1024), 0.96x
    // on Llama's 32000 x 1024 output layer; two rows 1.10x on Llama's layers
    // (0.90x on its output layer); three rows 1.14x, 1.34x and 1.6x (GPT-2).
    // Within a range the column loop keeps up to three rows (cpu_passes.hpp).
    const std::size_t column_loop_falls_behind = within_a_range ? 4 : 2;  // rows
    const std::size_t rows = shapes[0].elements() / std::max<std::size_t>(shapes[1].lens()[0], 1);
    if (rows >= column_loop_falls_behind) return false;
    for (const auto& algorithm : matmul_algorithms()) {
        if (!algorithm.eligible(request)) continue;
        return algorithm.name == few_rows_float32_columns_avx512_matmul.name ||
               algorithm.name == few_rows_float32_columns_matmul.name;
    }
    return false;
}

// Whether every reader of `weights` is a product reading it as its weights
// (input 1) only.
bool read_as_weights_only(instruction_ref weights) {
    if (weights->outputs().empty()) return false;
    for (auto reader : weights->outputs()) {
        if (!is_product(*reader)) return false;
        const auto& inputs = reader->inputs();
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (inputs[i] == weights && i != 1) return false;
    }
    return true;
}

// Readers of a transposed view that want it row-major: products that read
// it as their weights only, run by an algorithm other than the column loops.
bool read_row_major_only(instruction_ref view, const argument& view_values, const product_weight_layouts& pass) {
    if (!read_as_weights_only(view)) return false;
    if (pass.for_every_extent) return true;
    return std::none_of(view->outputs().begin(), view->outputs().end(), [&](instruction_ref reader) {
        return column_loop_reads(*reader, view, view_values, pass.within_a_range);
    });
}

// A float32 literal that only transposes of one permutation read, and whose
// views only products read as row-major weights, is replaced by its
// transposed values, row-major. A literal any other reader needs as it is (a
// column loop, a gather reading a tied embedding's rows) keeps its layout,
// and no second copy is made: such weights are stored once.
void lay_out_row_major(module& m, instruction_ref lit, const product_weight_layouts& pass) {
    const shape& s = lit->get_shape();
    if (s.type() != dtype::float_type || s.ndim() < 2 || s.elements() == 0 || lit->outputs().empty()) return;
    std::vector<instruction_ref> views;
    for (auto user : lit->outputs())
        if (std::find(views.begin(), views.end(), user) == views.end()) views.push_back(user);
    const operation& first = views.front()->get_operator();
    if (first.name() != "transpose") return;
    const argument stored = lit->get_literal().get_argument();
    if (stored.empty()) return;  // a loaded file's packed literal: no values to lay out
    const argument view_values = first.evaluate(views.front()->get_shape(), {stored});  // a transpose's value is a view
    for (auto view : views) {
        if (view->get_operator() != first || view->inputs().size() != 1) return;
        if (!read_row_major_only(view, view_values, pass)) return;
    }
    // One transposed copy for every program optimised from this literal's bytes.
    const argument transposed =
        shared_derived_value(stored, to_string(first), [&] { return view_values.contiguous(); });
    auto row_major = m.insert_literal(lit, literal::sharing(transposed));
    for (auto view : views) {
        m.replace_all_uses(view, row_major);
        m.remove_instruction(view);
    }
    m.remove_instruction(lit);
}

// A row-major float32 [K, N] literal that only one-row products read as
// their weights, each run by a column loop once the weights are [N, K], is
// replaced by its transposed values [N, K] and one transposed view of them
// (GPT-2's Conv1D weights, an ONNX decoder's MatMul initializers). Not for
// a program serving a range of extents: its row count varies.
void lay_out_columns(module& m, instruction_ref lit, const product_weight_layouts& pass) {
    const shape& s = lit->get_shape();
    if (pass.for_every_extent || pass.within_a_range || s.type() != dtype::float_type || s.ndim() != 2 ||
        !s.standard() || s.elements() == 0 || !read_as_weights_only(lit))
        return;
    const argument stored = lit->get_literal().get_argument();
    if (stored.empty()) return;
    op::transpose swap_op;
    swap_op.permutation = {1, 0};
    const operation swap = swap_op;
    const shape columns_shape{s.type(), {s.lens()[1], s.lens()[0]}};
    // The [K, N] view of [N, K] weights, as the products would read it. Its values matter only to
    // the algorithms' eligibility: the stored bytes stand in until the transposed copy is worth making.
    const argument stand_in(columns_shape, const_cast<std::byte*>(stored.data()));
    const argument view_values = swap.evaluate(swap.compute_shape({columns_shape}), {stand_in});
    for (auto reader : lit->outputs())
        if (!column_loop_reads(*reader, lit, view_values, false)) return;
    const argument columns = shared_derived_value(
        stored, to_string(swap), [&] { return swap.evaluate(swap.compute_shape({s}), {stored}).contiguous(); });
    auto stored_columns = m.insert_literal(lit, literal::sharing(columns));
    auto view = m.insert_instruction(lit, swap, {stored_columns});
    m.replace_all_uses(lit, view);
    m.remove_instruction(lit);
}

}  // namespace

void product_weight_layouts::apply(module& m) const {
    std::vector<instruction_ref> literals;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->is_literal()) literals.push_back(ins);
    for (auto lit : literals) {
        if (!lit->outputs().empty() && lit->outputs().front()->name() == "transpose")
            lay_out_row_major(m, lit, *this);
        else
            lay_out_columns(m, lit, *this);
    }
}

}  // namespace kiln
