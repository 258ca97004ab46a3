// ONNX importer: gather/scatter, sequence-generating, TopK and quantization
// parsers on tiny in-memory models, run on ref and cpu. Expected values are
// numpy's, with the expression beside them.
#include <gtest/gtest.h>

#include "onnx_model_builder.hpp"
#include "test_helpers.hpp"

using namespace kiln;
using test::onnx_model_builder;
using test::set_attr;

namespace {

constexpr auto float_type = onnx::TensorProto::FLOAT;

std::vector<std::vector<double>> run_both(const program& p, const parameter_map& inputs, std::size_t outputs) {
    std::vector<std::vector<double>> first;
    for (const auto* t : {"ref", "cpu"}) {
        auto out = test::run_on(p, t, inputs);
        EXPECT_EQ(out.size(), outputs) << t;
        std::vector<std::vector<double>> values;
        for (const auto& o : out) values.push_back(o.to_vector<double>());
        if (first.empty())
            first = values;
        else
            EXPECT_EQ(values, first) << "cpu differs from ref";
    }
    return first;
}

argument floats(const std::vector<std::size_t>& lens, const std::vector<float>& v) {
    return test::make_argument(shape{dtype::float_type, lens}, v);
}

void expect_error(const onnx_model_builder& b, error_kind kind, const std::string& fragment) {
    try {
        b.parse();
        ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
}

}  // namespace

TEST(onnx_import_index, topk_gives_values_and_indices) {
    onnx_model_builder b(11);
    b.input("x", float_type, {2, 4}).output("v").output("i");
    b.int64_initializer("k", {2});
    b.node("TopK", {"x", "k"}, {"v", "i"});
    auto out = run_both(b.parse(), {{"x", floats({2, 4}, {3, 1, 3, 2, 0, 5, 5, 5})}}, 2);
    // i = np.argsort(-x, 1, kind="stable")[:, :2]
    EXPECT_EQ(out[0], (std::vector<double>{3, 3, 5, 5}));
    EXPECT_EQ(out[1], (std::vector<double>{0, 2, 1, 2}));
}

TEST(onnx_import_index, gather_elements_and_scatter_nd_with_reduction) {
    onnx_model_builder b(18);
    b.input("x", float_type, {2, 2}).output("g").output("s");
    auto& idx = b.initializer("idx", onnx::TensorProto::INT64, {2, 2});
    for (std::int64_t v : {1, 0, 1, 1}) idx.add_int64_data(v);
    auto& rows = b.initializer("rows", onnx::TensorProto::INT64, {2, 1});
    for (std::int64_t v : {1, 1}) rows.add_int64_data(v);
    b.node("GatherElements", {"x", "idx"}, {"g"});
    set_attr(b.node("ScatterND", {"x", "rows", "g"}, {"s"}), "reduction", std::string("add"));
    auto out = run_both(b.parse(), {{"x", floats({2, 2}, {1, 2, 3, 4})}}, 2);
    // g = np.take_along_axis(x, idx, 0) = [[3, 2], [3, 4]]; s = x with s[1] += g[0] + g[1]
    EXPECT_EQ(out[0], (std::vector<double>{3, 2, 3, 4}));
    EXPECT_EQ(out[1], (std::vector<double>{1, 2, 9, 10}));
}

TEST(onnx_import_index, range_folds_and_needs_constant_inputs) {
    onnx_model_builder b(11);
    b.output("r");
    auto scalar = [&](const std::string& name, std::int64_t v) {
        b.initializer(name, onnx::TensorProto::INT64, {}).add_int64_data(v);
    };
    scalar("s", 1);
    scalar("l", 10);
    scalar("d", 3);
    b.node("Range", {"s", "l", "d"}, {"r"});
    program p = b.parse();
    auto ret = p.get_main_module()->get_return()->inputs().at(0);
    ASSERT_TRUE(ret->is_literal());
    EXPECT_EQ(ret->get_literal().to_vector<double>(), (std::vector<double>{1, 4, 7}));  // np.arange(1, 10, 3)

    onnx_model_builder dynamic(11);
    dynamic.input("s", onnx::TensorProto::FLOAT, {}).output("r");
    dynamic.float_initializer("l", {}, {1});
    dynamic.float_initializer("d", {}, {-1.5f});
    dynamic.node("Range", {"s", "l", "d"}, {"r"});
    expect_error(dynamic, error_kind::not_implemented, "data-dependent output shape is not supported");
}

TEST(onnx_import_index, compress_with_constant_condition_and_tile) {
    onnx_model_builder b(13);
    b.input("x", float_type, {2, 3}).output("c").output("t");
    auto& cond = b.initializer("cond", onnx::TensorProto::BOOL, {3});
    for (int v : {1, 0, 1}) cond.add_int32_data(v);
    b.int64_initializer("reps", {2, 1});
    set_attr(b.node("Compress", {"x", "cond"}, {"c"}), "axis", std::int64_t{1});
    b.node("Tile", {"x", "reps"}, {"t"});
    auto out = run_both(b.parse(), {{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}}, 2);
    EXPECT_EQ(out[0], (std::vector<double>{1, 3, 4, 6}));                          // np.compress([1,0,1], x, 1)
    EXPECT_EQ(out[1], (std::vector<double>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));  // np.tile(x, (2, 1))

    onnx_model_builder dynamic(13);
    dynamic.input("x", float_type, {3}).input("cond", onnx::TensorProto::BOOL, {3}).output("c");
    dynamic.node("Compress", {"x", "cond"}, {"c"});
    expect_error(dynamic, error_kind::not_implemented, "data-dependent output shape is not supported");
}

TEST(onnx_import_quant, qlinear_matmul_matches_the_integer_formula) {
    onnx_model_builder b(10);
    b.input("a", onnx::TensorProto::UINT8, {2, 4}).output("y");
    auto u8 = [&](const std::string& name, std::vector<std::int64_t> dims, std::vector<int> values) {
        auto& t = b.initializer(name, onnx::TensorProto::UINT8, dims);
        for (int v : values) t.add_int32_data(v);
    };
    u8("b", {4, 3}, {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247});
    u8("a_z", {}, {113});
    u8("b_z", {}, {114});
    u8("y_z", {}, {118});
    b.float_initializer("a_s", {}, {0.0066f});
    b.float_initializer("b_s", {}, {0.00705f});
    b.float_initializer("y_s", {}, {0.0107f});
    b.node("QLinearMatMul", {"a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"}, {"y"});
    auto a = literal(shape{dtype::uint8_type, {2, 4}}, std::vector<int>{208, 236, 0, 238, 3, 214, 255, 29});
    auto out = run_both(b.parse(), {{"a", a.get_argument().copy()}}, 1);
    // C = (a - a_z) @ (b - b_z) in int32; np.clip(np.rint(C * (a_s * b_s / y_s) + y_z), 0, 255)
    EXPECT_EQ(out[0], (std::vector<double>{168, 115, 255, 1, 66, 151}));
}

TEST(onnx_import_quant, dynamic_quantize_linear_gives_three_outputs) {
    onnx_model_builder b(11);
    b.input("x", float_type, {6}).output("y").output("s").output("z");
    b.node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"});
    auto out = run_both(b.parse(), {{"x", floats({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f})}}, 3);
    // s = (max(0, x.max()) - min(0, x.min())) / 255 in float32; z = rint(clip(-min / s, 0, 255));
    // y = clip(rint(x / s) + z, 0, 255)
    EXPECT_EQ(out[0], (std::vector<double>{153, 255, 0, 26, 221, 179}));
    EXPECT_NEAR(out[1].at(0), 0.019607843831181526, 1e-9);
    EXPECT_EQ(out[2], (std::vector<double>{153}));
}
