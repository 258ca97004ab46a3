// A dynamic ONNX program imports its model again at each extent it
// optimises or compiles; those imports share the main graph's initializers
// (onnx/initializer_cache.hpp) instead of copying the weights each time.
#include <gtest/gtest.h>

#include "onnx/dynamic_inputs.hpp"
#include "onnx_model_builder.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// x [N, 4] -> MatMul by W [4, 3].
std::string product_model() {
    onnx_model_builder b;
    b.input("x", onnx::TensorProto::FLOAT, {-1, 4}).output("y");
    b.float_initializer("W", {4, 3}, std::vector<float>(12, 0.5f));
    b.node("MatMul", {"x", "W"}, {"y"});
    return b.bytes();
}

const std::byte* weights_of(const program& p) {
    for (const auto& ins : *p.get_main_module())
        if (ins.is_literal() && ins.get_shape().lens() == std::vector<std::size_t>{4, 3})
            return ins.get_literal().get_argument().data();
    return nullptr;
}

}  // namespace

TEST(onnx_initializer_cache, imports_at_two_extents_share_the_weights) {
    const std::string bytes = product_model();
    auto again = onnx_import::buffer_specialiser(bytes.data(), bytes.size(), {});
    const program at_2 = again->specialise({{"x", {2, 4}}});
    const program at_64 = again->specialise({{"x", {64, 4}}});
    ASSERT_NE(weights_of(at_2), nullptr);
    EXPECT_EQ(weights_of(at_2), weights_of(at_64));
    EXPECT_EQ(at_64.get_main_module()->get_parameter_shapes().at("x").lens(), (std::vector<std::size_t>{64, 4}));
}

TEST(onnx_initializer_cache, separate_imports_keep_their_own_weights) {
    const std::string bytes = product_model();
    auto one = onnx_import::buffer_specialiser(bytes.data(), bytes.size(), {});
    auto other = onnx_import::buffer_specialiser(bytes.data(), bytes.size(), {});
    EXPECT_NE(weights_of(one->specialise({{"x", {2, 4}}})), weights_of(other->specialise({{"x", {2, 4}}})));
}
