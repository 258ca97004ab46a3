#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <set>

#include "kiln/kiln.hpp"

using namespace kiln;

TEST(operation, attributes_come_from_one_declaration) {
    operation op = make_op("mod", value_map{{"fmod", true}});
    EXPECT_EQ(op.name(), "mod");
    EXPECT_EQ(to_string(op), "mod[fmod=true]");
    const value attrs = op.attributes();
    ASSERT_TRUE(attrs.is_map());
    ASSERT_EQ(attrs.as_map().size(), 1u);
    EXPECT_EQ(attrs.as_map()[0].first, "fmod");
    EXPECT_EQ(attrs.as_map()[0].second, value(true));
    // Equality and hashing follow the attributes.
    EXPECT_EQ(op, make_op("mod", value_map{{"fmod", true}}));
    EXPECT_NE(op, make_op("mod"));
    EXPECT_EQ(op.hash(), make_op("mod", value_map{{"fmod", 1}}).hash());
    EXPECT_NE(make_op("add"), make_op("sub"));
}

TEST(operation, dtype_attributes_parse_from_strings) {
    operation op = make_op("convert", value_map{{"target_type", "int8"}});
    EXPECT_EQ(to_string(op), "convert[target_type=\"int8_type\",saturate=true,round_mode=\"up\"]");
    EXPECT_EQ(op.compute_shape({shape{dtype::float_type, {2}}}), (shape{dtype::int8_type, {2}}));
}

TEST(operation, unknown_op_and_bad_attributes_are_clear_errors) {
    try {
        make_op("relux");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::not_implemented);
        EXPECT_NE(std::string(e.what()).find("'relux'"), std::string::npos) << e.what();
    }
    try {
        make_op("mod", value_map{{"fmode", true}});
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("no attribute 'fmode'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("fmod"), std::string::npos) << e.what();
    }
    try {
        make_op("convert", value_map{{"target_type", 3.5}});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::type_error);
        EXPECT_NE(std::string(e.what()).find("'target_type'"), std::string::npos) << e.what();
    }
    try {
        make_op("add", value_map{{"axis", 1}});
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("takes none"), std::string::npos) << e.what();
    }
}

TEST(operation, registry_lists_user_ops_only) {
    auto names = get_operators();
    EXPECT_NE(std::find(names.begin(), names.end(), "add"), names.end());
    EXPECT_EQ(std::find(names.begin(), names.end(), "@param"), names.end());
    for (const auto& n : names) EXPECT_EQ(make_op(n).name(), n);
}

namespace {

// The op's reference compute on one float32 element per input.
float reference_value(const operation& op, const std::vector<float>& inputs) {
    std::vector<argument> args;
    std::vector<shape> shapes;
    for (float v : inputs) {
        args.emplace_back(shape{dtype::float_type, {1}});
        *args.back().data_as<float>() = v;
        shapes.push_back(args.back().get_shape());
    }
    return *op.evaluate(op.compute_shape(shapes), args).data_as<float>();
}

// Bits, so that NaNs compare too: the formula must give the reference's bits.
std::uint32_t bits(float v) {
    return std::bit_cast<std::uint32_t>(v);
}

const std::vector<float> samples{-2.5f, -1.0f, -0.75f, -0.0f, 0.0f, 0.3f, 0.5f, 1.0f, 2.0f, 7.25f, 1e-7f, 88.0f};

}  // namespace

TEST(operation, elementwise_ops_declare_their_float32_formula) {
    for (const operation& op : {make_op("exp"), make_op("log"), make_op("sin"), make_op("tan"), make_op("asinh"),
                                make_op("atanh"), make_op("sigmoid"), make_op("round"), make_op("relu"),
                                make_op("gelu"), make_op("gelu", value_map{{"approximate", "tanh"}})}) {
        SCOPED_TRACE(to_string(op));
        EXPECT_TRUE(op.is_pointwise());
        const pointwise_formula f = op.float32_formula();
        ASSERT_NE(f.unary, nullptr);
        EXPECT_EQ(f.binary, nullptr);
        for (float x : samples) EXPECT_EQ(bits(f.unary(x)), bits(reference_value(op, {x}))) << x;
    }
    for (const operation& op : {make_op("add"), make_op("div"), make_op("pow"), make_op("max"), make_op("mod"),
                                make_op("mod", value_map{{"fmod", true}})}) {
        SCOPED_TRACE(to_string(op));
        EXPECT_TRUE(op.is_pointwise());
        const pointwise_formula f = op.float32_formula();
        ASSERT_NE(f.binary, nullptr);
        EXPECT_EQ(f.unary, nullptr);
        for (float a : samples)
            for (float b : samples)
                EXPECT_EQ(bits(f.binary(a, b)), bits(reference_value(op, {a, b}))) << a << ", " << b;
    }
    // mod's attribute picks the function: the two signs of the remainder differ.
    EXPECT_NE(bits(make_op("mod").float32_formula().binary(-7.25f, 2.0f)),
              bits(make_op("mod", value_map{{"fmod", true}}).float32_formula().binary(-7.25f, 2.0f)));
}

TEST(operation, elementwise_ops_without_a_float32_result_have_no_formula) {
    // Elementwise, but a bool result, three inputs, another dtype or integers only.
    for (const char* name : {"equal", "less", "not", "and", "where", "clip", "convert", "bitwise_and", "bitshift"}) {
        const operation op = make_op(name);
        EXPECT_TRUE(op.is_pointwise()) << name;
        EXPECT_EQ(op.float32_formula().unary, nullptr) << name;
        EXPECT_EQ(op.float32_formula().binary, nullptr) << name;
    }
}

TEST(operation, other_ops_are_not_pointwise) {
    for (const char* name : {"dot", "convolution", "softmax", "reshape", "reduce_sum", "concat", "fused_pointwise"}) {
        const operation op = make_op(name);
        EXPECT_FALSE(op.is_pointwise()) << name;
        EXPECT_EQ(op.float32_formula().unary, nullptr) << name;
        EXPECT_EQ(op.float32_formula().binary, nullptr) << name;
    }
}

// The ops that declare is_pointwise are the ones a fused_pointwise step could
// run before the fact moved onto the ops: fusion must not change.
TEST(operation, pointwise_ops_are_the_fusable_elementwise_ops) {
    std::set<std::string> pointwise;
    for (const auto& name : get_operators())
        if (make_op(name).is_pointwise()) pointwise.insert(name);
    const std::set<std::string> expected{
        "abs",        "neg",         "exp",      "log",   "sqrt",    "rsqrt", "reciprocal", "sin",   "cos",
        "tanh",       "sigmoid",     "relu",     "erf",   "floor",   "ceil",  "round",      "sign",  "not",
        "gelu",       "tan",         "asin",     "acos",  "atan",    "sinh",  "cosh",       "asinh", "acosh",
        "atanh",      "bitwise_not", "convert",  "add",   "sub",     "mul",   "div",        "pow",   "max",
        "min",        "mod",         "equal",    "less",  "greater", "and",   "or",         "xor",   "bitwise_and",
        "bitwise_or", "bitwise_xor", "bitshift", "where", "clip"};
    EXPECT_EQ(pointwise, expected);
}

TEST(value, conversions_and_text) {
    value v = value_list{1, 2, 3};
    EXPECT_EQ(to_string(v), "{1, 2, 3}");
    EXPECT_THROW(value("x").as_int(), error);
    EXPECT_EQ(value(2.0).as_int(), 2);
    EXPECT_THROW(value(2.5).as_int(), error);
    EXPECT_EQ(hash_value(value_list{1, 2}), hash_value(value_list{1, 2}));
    EXPECT_NE(hash_value(value_list{1, 2}), hash_value(value_list{2, 1}));
}
