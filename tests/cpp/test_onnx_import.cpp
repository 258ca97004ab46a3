// ONNX importer: models built in memory, parsed, run on ref and cpu and
// compared with hand- or numpy-computed values.
#include <gtest/gtest.h>

#include "onnx_model_builder.hpp"
#include "test_helpers.hpp"

using namespace kiln;
using test::onnx_model_builder;
using test::set_attr;

namespace {

constexpr auto float_type = onnx::TensorProto::FLOAT;

// Runs `p` on ref and cpu and checks output 0 against `expected`.
void expect_outputs(const program& p, const parameter_map& inputs, const std::vector<float>& expected,
                    float tolerance = 1e-5f) {
    for (const auto* t : {"ref", "cpu"}) {
        auto out = test::run_on(p, t, inputs);
        ASSERT_EQ(out.size(), 1u) << t;
        auto got = out[0].to_vector<float>();
        ASSERT_EQ(got.size(), expected.size()) << t;
        for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tolerance) << t << " [" << i << "]";
    }
}

argument floats(const std::vector<std::size_t>& lens, const std::vector<float>& v) {
    return test::make_argument(shape{dtype::float_type, lens}, v);
}

// The literal feeding the module's return (for graphs folded to a constant).
literal returned_literal(program& p) {
    auto ret = p.get_main_module()->get_return();
    auto value = ret->inputs().at(0);
    EXPECT_TRUE(value->is_literal()) << p;
    return value->get_literal();
}

}  // namespace

TEST(onnx_import, add_relu_with_broadcast_initializer) {
    onnx_model_builder b;
    b.input("x", float_type, {2, 3}).output("y");
    b.float_initializer("bias", {3}, {1.0f, -2.0f, 0.5f});
    b.node("Add", {"x", "bias"}, {"sum"});
    b.node("Relu", {"sum"}, {"y"});
    program p = b.parse();
    EXPECT_EQ(p.get_parameter_names(), std::vector<std::string>{"x"});
    // relu(x + {1, -2, 0.5}) by hand
    expect_outputs(p, {{"x", floats({2, 3}, {0, 1, 2, -3, 4, -5})}}, {1, 0, 2.5, 0, 2, 0});
}

TEST(onnx_import, initializer_also_listed_as_input_is_a_literal) {
    onnx_model_builder b;
    b.input("x", float_type, {2}).input("w", float_type, {2}).output("y");
    b.float_initializer("w", {2}, {3, 4});
    b.node("Mul", {"x", "w"}, {"y"});
    program p = b.parse();
    EXPECT_EQ(p.get_parameter_names(), std::vector<std::string>{"x"});
    expect_outputs(p, {{"x", floats({2}, {2, -1})}}, {6, -4});
}

TEST(onnx_import, symbolic_dims_use_default_or_mapped_values) {
    onnx_model_builder b;
    b.input("x", float_type, {-1, 3}).output("y");
    b.node("Neg", {"x"}, {"y"});
    // Left unresolved, an unknown dim is an error that names it.
    try {
        b.parse();
        ADD_FAILURE() << "an unresolved dim was given an extent";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("graph input 'x': dim 0 is symbolic ('N'); give its extent"), std::string::npos)
            << e.what();
    }
    onnx_options o;
    o.default_dim_value = 4;
    EXPECT_EQ(b.parse(o).get_parameter_shapes().at("x").lens(), (std::vector<std::size_t>{4, 3}));
    o.map_input_dims["x"] = {2, 3};
    EXPECT_EQ(b.parse(o).get_parameter_shapes().at("x").lens(), (std::vector<std::size_t>{2, 3}));
}

TEST(onnx_import, tensor_conversion_of_every_dtype_raw_and_typed) {
    struct tensor_case {
        std::int32_t type;
        bool raw;
        std::vector<double> expected;
        void (*fill)(onnx::TensorProto&);
    };
    const tensor_case cases[] = {
        {onnx::TensorProto::FLOAT, true, {1.5, -2}, [](onnx::TensorProto& t) { t.set_raw_data(test::raw_bytes<float>({1.5f, -2.0f})); }},
        {onnx::TensorProto::DOUBLE, false, {0.25, 8}, [](onnx::TensorProto& t) { t.add_double_data(0.25); t.add_double_data(8); }},
        {onnx::TensorProto::DOUBLE, true, {0.25, 8}, [](onnx::TensorProto& t) { t.set_raw_data(test::raw_bytes<double>({0.25, 8})); }},
        {onnx::TensorProto::INT8, false, {-7, 5}, [](onnx::TensorProto& t) { t.add_int32_data(-7); t.add_int32_data(5); }},
        {onnx::TensorProto::INT8, true, {-7, 5}, [](onnx::TensorProto& t) { t.set_raw_data(test::raw_bytes<std::int8_t>({-7, 5})); }},
        {onnx::TensorProto::UINT8, false, {200, 5}, [](onnx::TensorProto& t) { t.add_int32_data(200); t.add_int32_data(5); }},
        {onnx::TensorProto::INT16, true, {-300, 5}, [](onnx::TensorProto& t) { t.set_raw_data(test::raw_bytes<std::int16_t>({-300, 5})); }},
        {onnx::TensorProto::UINT16, false, {60000, 5}, [](onnx::TensorProto& t) { t.add_int32_data(60000); t.add_int32_data(5); }},
        {onnx::TensorProto::INT32, false, {-70000, 5}, [](onnx::TensorProto& t) { t.add_int32_data(-70000); t.add_int32_data(5); }},
        {onnx::TensorProto::INT64, false, {-5000000000.0, 5}, [](onnx::TensorProto& t) { t.add_int64_data(-5000000000); t.add_int64_data(5); }},
        {onnx::TensorProto::INT64, true, {-5000000000.0, 5}, [](onnx::TensorProto& t) { t.set_raw_data(test::raw_bytes<std::int64_t>({-5000000000, 5})); }},
        {onnx::TensorProto::UINT32, false, {4000000000.0, 5}, [](onnx::TensorProto& t) { t.add_uint64_data(4000000000); t.add_uint64_data(5); }},
        {onnx::TensorProto::UINT64, false, {1e19, 5}, [](onnx::TensorProto& t) { t.add_uint64_data(10000000000000000000ull); t.add_uint64_data(5); }},
        {onnx::TensorProto::BOOL, false, {1, 0}, [](onnx::TensorProto& t) { t.add_int32_data(1); t.add_int32_data(0); }},
        {onnx::TensorProto::BOOL, true, {1, 0}, [](onnx::TensorProto& t) { t.set_raw_data(test::raw_bytes<std::uint8_t>({1, 0})); }},
        // float16 bits: 0x3E00 = 1.5, 0xC000 = -2 (numpy.float16 .view(uint16))
        {onnx::TensorProto::FLOAT16, false, {1.5, -2}, [](onnx::TensorProto& t) { t.add_int32_data(0x3E00); t.add_int32_data(0xC000); }},
        {onnx::TensorProto::FLOAT16, true, {1.5, -2}, [](onnx::TensorProto& t) { t.set_raw_data(test::raw_bytes<std::uint16_t>({0x3E00, 0xC000})); }},
        // bfloat16 bits: the high half of the float32 bits, 0x3FC0 = 1.5, 0xC000 = -2
        {onnx::TensorProto::BFLOAT16, false, {1.5, -2}, [](onnx::TensorProto& t) { t.add_int32_data(0x3FC0); t.add_int32_data(0xC000); }},
        {onnx::TensorProto::BFLOAT16, true, {1.5, -2}, [](onnx::TensorProto& t) { t.set_raw_data(test::raw_bytes<std::uint16_t>({0x3FC0, 0xC000})); }},
    };
    for (const auto& c : cases) {
        onnx_model_builder b;
        b.output("y");
        c.fill(b.initializer("w", c.type, {2}));
        b.node("Identity", {"w"}, {"y"});
        program p = b.parse();
        auto lit = returned_literal(p);
        SCOPED_TRACE(onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(c.type)) +
                     (c.raw ? " raw" : " typed"));
        EXPECT_EQ(lit.get_shape().lens(), (std::vector<std::size_t>{2}));
        EXPECT_EQ(lit.to_vector<double>(), c.expected);
    }
}

TEST(onnx_import, clip_bounds_from_attributes_before_opset_11_and_inputs_after) {
    onnx_model_builder old_model(6);
    old_model.input("x", float_type, {4}).output("y");
    auto& n = old_model.node("Clip", {"x"}, {"y"});
    set_attr(n, "min", -1.0f);
    set_attr(n, "max", 2.0f);
    auto x = floats({4}, {-3, -0.5, 1, 5});
    expect_outputs(old_model.parse(), {{"x", x}}, {-1, -0.5, 1, 2});

    onnx_model_builder new_model(13);
    new_model.input("x", float_type, {4}).output("y");
    new_model.float_initializer("lo", {}, {0.0f});
    new_model.node("Clip", {"x", "lo", ""}, {"y"});  // no max: only the lower bound applies
    expect_outputs(new_model.parse(), {{"x", x}}, {0, 0, 1, 5});
}

TEST(onnx_import, cast_where_and_comparisons) {
    onnx_model_builder b;
    b.input("x", float_type, {4}).input("y", float_type, {4}).output("out");
    b.node("GreaterOrEqual", {"x", "y"}, {"ge"});
    b.node("Where", {"ge", "x", "y"}, {"mx"});
    auto& cast = b.node("Cast", {"mx"}, {"i"});
    set_attr(cast, "to", std::int64_t{onnx::TensorProto::INT32});
    auto& back = b.node("Cast", {"i"}, {"out"});
    set_attr(back, "to", std::int64_t{onnx::TensorProto::FLOAT});
    // trunc(max(x, y)) by hand
    expect_outputs(b.parse(), {{"x", floats({4}, {1.5, -2.7, 3, 0})}, {"y", floats({4}, {1, -2.2, 3, -1})}},
                   {1, -2, 3, 0});
}

TEST(onnx_import, variadic_sum_mean_max) {
    onnx_model_builder b;
    b.input("a", float_type, {2}).input("c", float_type, {2}).output("y");
    b.float_initializer("k", {1}, {3});
    b.node("Mean", {"a", "c", "k"}, {"m"});
    b.node("Max", {"m", "a"}, {"y"});
    // max((a + c + 3) / 3, a) by hand: a={0, 9}, c={6, 0} -> mean {3, 4}
    expect_outputs(b.parse(), {{"a", floats({2}, {0, 9})}, {"c", floats({2}, {6, 0})}}, {3, 9});
}

TEST(onnx_import, activations_match_numpy) {
    struct act {
        const char* op;
        std::vector<float> expected;
    };
    // x = np.array([-2, -0.5, 0, 1.5], np.float32)
    const act cases[] = {
        {"LeakyRelu", {-0.2f, -0.05f, 0, 1.5f}},                                // np.where(x<0, 0.1*x, x), alpha=0.1
        {"HardSigmoid", {0.1f, 0.4f, 0.5f, 0.8f}},                              // np.clip(0.2*x+0.5, 0, 1)
        {"Elu", {-0.86466473f, -0.39346933f, 0, 1.5f}},                         // np.where(x<0, np.exp(x)-1, x)
        {"Softplus", {0.12692805f, 0.474077f, 0.6931472f, 1.7014133f}},         // np.log(np.exp(x)+1)
        {"Gelu", {-0.04550026f, -0.15426877f, 0, 1.3997892f}},                  // 0.5*x*(1+erf(x/sqrt(2)))
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.op);
        onnx_model_builder b(20);
        b.input("x", float_type, {4}).output("y");
        auto& n = b.node(c.op, {"x"}, {"y"});
        if (std::string(c.op) == "LeakyRelu") set_attr(n, "alpha", 0.1f);
        expect_outputs(b.parse(), {{"x", floats({4}, {-2, -0.5, 0, 1.5})}}, c.expected, 1e-5f);
    }
}

TEST(onnx_import, constant_and_shape_fold_to_literals) {
    onnx_model_builder b;
    b.input("x", float_type, {2, 5, 3}).output("y");
    b.node("Shape", {"x"}, {"s"});
    auto& c = b.node("Constant", {}, {"two"});
    set_attr(c, "value_ints", std::vector<std::int64_t>{2, 2, 2});
    b.node("Mul", {"s", "two"}, {"y"});
    program p = b.parse();
    EXPECT_EQ(returned_literal(p).to_vector<std::int64_t>(), (std::vector<std::int64_t>{4, 10, 6}));
}

TEST(onnx_import, reduce_axes_attribute_before_opset_13_and_input_after) {
    auto x = floats({2, 3}, {1, 2, 3, 4, 5, 6});
    onnx_model_builder old_model(11);
    old_model.input("x", float_type, {2, 3}).output("y");
    auto& n = old_model.node("ReduceSum", {"x"}, {"y"});
    set_attr(n, "axes", std::vector<std::int64_t>{1});
    set_attr(n, "keepdims", std::int64_t{0});
    expect_outputs(old_model.parse(), {{"x", x}}, {6, 15});  // x.sum(axis=1)

    onnx_model_builder new_model(13);
    new_model.input("x", float_type, {2, 3}).output("y");
    new_model.int64_initializer("axes", {0});
    new_model.node("ReduceSum", {"x", "axes"}, {"y"});
    expect_outputs(new_model.parse(), {{"x", x}}, {5, 7, 9});  // x.sum(axis=0, keepdims=True)

    onnx_model_builder mean18(18);
    mean18.input("x", float_type, {2, 3}).output("y");
    mean18.int64_initializer("axes", {-1});
    mean18.node("ReduceMean", {"x", "axes"}, {"y"});
    expect_outputs(mean18.parse(), {{"x", x}}, {2, 5});  // x.mean(axis=-1, keepdims=True)
}

TEST(onnx_import, matmul_and_gemm_with_alpha_beta_and_transposes) {
    std::vector<float> a(6), bv(12);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
    for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = 0.5f * static_cast<float>(i);
    onnx_model_builder gemm;
    gemm.input("a", float_type, {2, 3}).output("y");
    gemm.float_initializer("b", {3, 4}, bv);
    gemm.float_initializer("c", {4}, {1, 2, 3, 4});
    auto& n = gemm.node("Gemm", {"a", "b", "c"}, {"y"});
    set_attr(n, "alpha", 0.5f);
    set_attr(n, "beta", 2.0f);
    // a = np.arange(6).reshape(2,3); b = np.arange(12).reshape(3,4)*0.5; 0.5*(a@b) + 2*[1,2,3,4]
    expect_outputs(gemm.parse(), {{"a", floats({2, 3}, a)}}, {7.0, 9.75, 12.5, 15.25, 16.0, 21.0, 26.0, 31.0});

    onnx_model_builder trans;
    trans.input("at", float_type, {3, 2}).output("y");
    trans.float_initializer("b", {3, 4}, bv);
    auto& t = trans.node("Gemm", {"at", "b"}, {"y"});
    set_attr(t, "transA", std::int64_t{1});
    // at = a.T; at.T @ b
    expect_outputs(trans.parse(), {{"at", floats({3, 2}, {0, 3, 1, 4, 2, 5})}},
                   {10.0, 11.5, 13.0, 14.5, 28.0, 34.0, 40.0, 46.0});

    onnx_model_builder mm;
    mm.input("a", float_type, {2, 3}).output("y");
    mm.float_initializer("b", {3, 4}, bv);
    mm.node("MatMul", {"a", "b"}, {"y"});
    // a @ b
    expect_outputs(mm.parse(), {{"a", floats({2, 3}, a)}}, {10.0, 11.5, 13.0, 14.5, 28.0, 34.0, 40.0, 46.0});
}

TEST(onnx_import, reshape_with_shape_computed_from_the_input) {
    // y = x.reshape(x.shape[0], -1): Shape -> Gather -> Unsqueeze -> Concat -> Reshape, all folded.
    onnx_model_builder b(13);
    b.input("x", float_type, {2, 3, 2}).output("y");
    b.node("Shape", {"x"}, {"s"});
    b.initializer("zero", onnx::TensorProto::INT64, {}).add_int64_data(0);
    b.node("Gather", {"s", "zero"}, {"batch"});
    b.int64_initializer("axes0", {0});
    b.node("Unsqueeze", {"batch", "axes0"}, {"batch1"});
    b.int64_initializer("minus1", {-1});
    auto& cat = b.node("Concat", {"batch1", "minus1"}, {"dims"});
    set_attr(cat, "axis", std::int64_t{0});
    b.node("Reshape", {"x", "dims"}, {"y"});
    program p = b.parse();
    EXPECT_EQ(p.get_output_shapes().at(0).lens(), (std::vector<std::size_t>{2, 6}));
    std::vector<float> v(12);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    expect_outputs(p, {{"x", floats({2, 3, 2}, v)}}, v);
}

TEST(onnx_import, slice_attributes_before_opset_10_and_inputs_after) {
    auto x = floats({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
    onnx_model_builder old_model(9);
    old_model.input("x", float_type, {2, 4}).output("y");
    auto& n = old_model.node("Slice", {"x"}, {"y"});
    set_attr(n, "starts", std::vector<std::int64_t>{1});
    set_attr(n, "ends", std::vector<std::int64_t>{3});
    set_attr(n, "axes", std::vector<std::int64_t>{1});
    expect_outputs(old_model.parse(), {{"x", x}}, {1, 2, 5, 6});  // x[:, 1:3]

    onnx_model_builder new_model(13);
    new_model.input("x", float_type, {2, 4}).output("y");
    new_model.int64_initializer("starts", {-3});
    new_model.int64_initializer("ends", {100});
    new_model.int64_initializer("axes", {-1});
    new_model.int64_initializer("steps", {2});
    new_model.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
    expect_outputs(new_model.parse(), {{"x", x}}, {1, 3, 5, 7});  // x[:, -3:100:2]
}

TEST(onnx_import, transpose_flatten_and_pad) {
    onnx_model_builder b(13);
    b.input("x", float_type, {2, 3}).output("y");
    auto& t = b.node("Transpose", {"x"}, {"t"});
    set_attr(t, "perm", std::vector<std::int64_t>{1, 0});
    b.int64_initializer("pads", {0, 1, 0, 0});
    b.float_initializer("fill", {}, {9});
    b.node("Pad", {"t", "pads", "fill"}, {"p"});
    b.node("Flatten", {"p"}, {"y"});
    // np.pad(x.T, ((0,0),(1,0)), constant_values=9).reshape(3, -1), x = [[0,1,2],[3,4,5]]
    expect_outputs(b.parse(), {{"x", floats({2, 3}, {0, 1, 2, 3, 4, 5})}}, {9, 0, 3, 9, 1, 4, 9, 2, 5});
}

TEST(onnx_import, skip_unknown_operators_drops_nodes_whose_outputs_are_unused) {
    onnx_model_builder b;
    b.input("x", float_type, {2}).output("y").output("z");
    b.node("Relu", {"x"}, {"y"});
    b.node("FancyOp", {"x"}, {"z"}, "fancy");
    onnx_options o;
    o.skip_unknown_operators = true;
    program p = b.parse(o);
    EXPECT_EQ(p.get_output_shapes().size(), 1u);
    expect_outputs(p, {{"x", floats({2}, {-1, 2})}}, {0, 2});
}

TEST(onnx_import, conv_with_bias_and_max_pool) {
    std::vector<float> x(16);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * static_cast<float>(i) - 3;
    onnx_model_builder conv;
    conv.input("x", float_type, {1, 1, 4, 4}).output("y");
    conv.float_initializer("w", {1, 1, 2, 2}, {1, 0, 0, -1});
    conv.float_initializer("b", {1}, {0.5f});
    conv.node("Conv", {"x", "w", "b"}, {"y"});
    // x = np.arange(16).reshape(4,4)*0.5-3; (x[i:i+2,j:j+2]*[[1,0],[0,-1]]).sum()+0.5 for each window
    expect_outputs(conv.parse(), {{"x", floats({1, 1, 4, 4}, x)}}, std::vector<float>(9, -2.0f));

    onnx_model_builder pool;
    pool.input("x", float_type, {1, 1, 4, 4}).output("y");
    auto& n = pool.node("MaxPool", {"x"}, {"y"});
    set_attr(n, "kernel_shape", std::vector<std::int64_t>{2, 2});
    set_attr(n, "strides", std::vector<std::int64_t>{2, 2});
    // x.reshape(2,2,2,2).max(axis=(1,3))
    expect_outputs(pool.parse(), {{"x", floats({1, 1, 4, 4}, x)}}, {-0.5f, 0.5f, 3.5f, 4.5f});
}

TEST(onnx_import, softmax_before_opset_13_normalizes_the_flattened_input) {
    onnx_model_builder b(11);
    b.input("x", float_type, {2, 3}).output("y");
    auto& n = b.node("Softmax", {"x"}, {"y"});
    set_attr(n, "axis", std::int64_t{0});
    // s = [[1,2,3],[4,5,6]]; np.exp(s) / np.exp(s).sum()
    expect_outputs(b.parse(), {{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}},
                   {0.0042697792f, 0.011606461f, 0.031549636f, 0.085760795f, 0.23312204f, 0.6336913f});
}
