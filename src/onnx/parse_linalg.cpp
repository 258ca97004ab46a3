// ONNX matrix products: MatMul maps to dot (numpy.matmul semantics); Gemm is
// composed as alpha * op(A) op(B) + beta * C.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

args_t parse_matmul(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    return {ctx.add("dot", {args[0], args[1]})};
}

args_t parse_gemm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    auto a = args[0];
    auto b = args[1];
    for (auto* in : {&a, &b})
        if ((*in)->get_shape().ndim() != 2) ctx.fail(error_kind::invalid_argument, "A and B must be 2-D");
    const value swap = value_map{{"permutation", int_list(std::vector<std::int64_t>{1, 0})}};
    if (ctx.get_int("transA", 0) != 0) a = ctx.add("transpose", {a}, swap);
    if (ctx.get_int("transB", 0) != 0) b = ctx.add("transpose", {b}, swap);
    const dtype t = a->get_shape().type();
    double alpha = ctx.get_float("alpha", 1.0);
    double beta = ctx.get_float("beta", 1.0);
    auto y = ctx.add("dot", {a, b});
    if (alpha != 1.0) y = ctx.add("mul", {y, ctx.add_scalar(t, alpha)});
    if (ctx.has_input(args, 2) && beta != 0.0) {
        auto c = args[2];
        if (beta != 1.0) c = ctx.add("mul", {c, ctx.add_scalar(t, beta)});
        y = ctx.add("add", {y, c});
    }
    return {y};
}

}  // namespace

void add_linalg_parsers(parser_table& table) {
    table["MatMul"] = parse_matmul;
    table["Gemm"] = parse_gemm;
}

}  // namespace kiln::onnx_import
