// extent_plan::derive over values whose strides change with the extent (a
// sequence behind a batch of 3) and over two extents (a batch and a
// sequence of different ranges): each value's shape at a run's extents is
// what compute_shape gives there, and a view whose place in its source
// moves with the extent, a value whose strides move while its lengths stay,
// or a length that follows two extents at once, is refused with its name.
#include <gtest/gtest.h>

#include <memory>

#include "ir/run_time_extents.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr std::size_t longest = 16;

std::map<std::string, shape> sequence_behind_a_batch() {
    return {{"x", shape::from_dyn_dims(dtype::float_type,
                                       {dynamic_dimension(3), dynamic_dimension(1, longest), dynamic_dimension(8)})}};
}

// x [b, n, 8], then `build` adds the rest and returns the result.
template <class F>
std::unique_ptr<module> at_lengths(std::size_t b, std::size_t n, F build) {
    auto m = std::make_unique<module>();
    auto x = m->add_parameter("x", shape{dtype::float_type, {b, n, 8}});
    m->add_return({build(*m, x)});
    return m;
}

// x [3, n, 8], the sequence behind a batch of 3.
template <class F>
std::unique_ptr<module> at_length(std::size_t n, F build) {
    return at_lengths(3, n, build);
}

instruction_ref transposed_tanh(module& m, instruction_ref x) {
    auto t = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({1, 0, 2})}}), {x});
    return m.add_instruction(make_op("tanh"), {t});
}

std::map<std::string, shape> batch_and_sequence() {
    return {{"x", shape::from_dyn_dims(dtype::float_type, {dynamic_dimension(1, 4), dynamic_dimension(1, longest),
                                                           dynamic_dimension(8)})}};
}

// Why derive refuses `m` over `parameters` (empty: it does not).
std::string refusal(const module& m, const std::map<std::string, shape>& parameters) {
    std::string why;
    return extent_plan::derive(m, parameters, why) ? std::string{} : why;
}

// Every value of `plan`'s shapes at `extents` is `small`'s (the same graph
// built at those lengths), as compute_shape gives it.
void expect_shapes_of(const extent_plan& plan, const extent_lengths& extents, const module& small) {
    const auto shapes = plan.shapes_at(extents);
    std::size_t i = 0;
    for (const auto& ins : small) {
        if (!ins.is_return()) {
            EXPECT_EQ(shapes.at(i), ins.get_shape()) << ins.name() << " at " << to_string(extents);
        }
        ++i;
    }
}

}  // namespace

TEST(extent_plan, strides_behind_a_longer_dimension_follow_the_extent) {
    auto m = at_length(longest, transposed_tanh);
    std::string why;
    auto plan = extent_plan::derive(*m, sequence_behind_a_batch(), why);
    ASSERT_TRUE(plan) << why;
    expect_shapes_of(*plan, {5}, *at_length(5, transposed_tanh));
    // x and its transposed view vary in the sequence, their strides with it;
    // the tanh, written [n, 3, 8], has the sequence outermost.
    const auto& varying = plan->varying();
    ASSERT_TRUE(varying.at(0).size() == 1 && varying.at(1).size() == 1 && varying.at(2).size() == 1);
    EXPECT_TRUE(varying[0][0].moves_strides && varying[1][0].moves_strides);
    EXPECT_FALSE(varying[2][0].moves_strides);
    EXPECT_EQ(varying[1][0].dim, 0u);
}

TEST(extent_plan, a_view_whose_place_moves_with_the_extent_is_refused) {
    // The second batch entry starts n * 8 floats in.
    auto second_entry = [](module& m, instruction_ref x) {
        return m.add_instruction(
            make_op("slice", value_map{{"axes", ints({0})}, {"starts", ints({1})}, {"ends", ints({2})}}), {x});
    };
    const std::string why = refusal(*at_length(longest, second_entry), sequence_behind_a_batch());
    EXPECT_NE(why.find("its place in the value it views changes with the extent"), std::string::npos) << why;
}

TEST(extent_plan, strides_that_move_under_fixed_lengths_are_refused) {
    // The first row of each entry: [3, 1, 8] at every n, its batch stride n * 8.
    auto first_rows = [](module& m, instruction_ref x) {
        return m.add_instruction(
            make_op("slice", value_map{{"axes", ints({1})}, {"starts", ints({0})}, {"ends", ints({1})}}), {x});
    };
    const std::string why = refusal(*at_length(longest, first_rows), sequence_behind_a_batch());
    EXPECT_NE(why.find("its strides change with the extent"), std::string::npos) << why;
}

TEST(extent_plan, a_run_outside_the_plans_range_is_an_error) {
    auto m = at_length(longest, transposed_tanh);
    std::string why;
    auto plan = extent_plan::derive(*m, sequence_behind_a_batch(), why);
    ASSERT_TRUE(plan) << why;
    EXPECT_TRUE(plan->serves({{"x", {3, 7, 8}}}));
    EXPECT_FALSE(plan->serves({{"x", {3, 17, 8}}}));
    parameter_map inputs{{"x", argument(shape{dtype::float_type, {3, 17, 8}})}};
    EXPECT_THROW(plan->extents_of(inputs), error);
}

TEST(extent_plan, two_extents_each_length_following_one) {
    auto m = at_lengths(4, longest, transposed_tanh);
    std::string why;
    auto plan = extent_plan::derive(*m, batch_and_sequence(), why);
    ASSERT_TRUE(plan) << why;
    for (const auto& [b, n] : std::vector<std::pair<std::size_t, std::size_t>>{{3, 5}, {1, 1}, {4, 2}, {2, longest}})
        expect_shapes_of(*plan, {b, n}, *at_lengths(b, n, transposed_tanh));
    // The input varies in both its dimensions, each with its own extent.
    const auto& x = plan->varying().at(0);
    ASSERT_EQ(x.size(), 2u);
    EXPECT_EQ(x[0].dim, 0u);
    EXPECT_EQ(x[0].extent, 0u);
    EXPECT_EQ(x[1].dim, 1u);
    EXPECT_EQ(x[1].extent, 1u);
    EXPECT_TRUE(plan->serves({{"x", {1, 16, 8}}}));
    EXPECT_FALSE(plan->serves({{"x", {5, 16, 8}}}));
}

TEST(extent_plan, a_length_that_follows_two_extents_is_refused) {
    // [b, n, 8] -> [b * n, 8]: rows of every batch entry folded together.
    auto folded = [](module& m, instruction_ref x) {
        return m.add_instruction(make_op("reshape", value_map{{"dims", ints({-1, 8})}}), {x});
    };
    const std::string why = refusal(*at_lengths(4, longest, folded), batch_and_sequence());
    EXPECT_NE(why.find("follows two extents"), std::string::npos) << why;
}

TEST(extent_plan, two_dimensions_of_one_range_in_one_input_are_two_extents) {
    std::vector<extent_range> ranges;
    std::string why;
    const auto dims = extent_dimensions(
        {{"x", shape::from_dyn_dims(dtype::float_type, {dynamic_dimension(1, 8), dynamic_dimension(1, 8)})},
         {"mask", shape::from_dyn_dims(dtype::float_type, {dynamic_dimension(1, 8), dynamic_dimension(1, 8)})}},
        ranges, why);
    ASSERT_EQ(dims.size(), 4u);
    EXPECT_EQ(ranges.size(), 2u);
    for (const auto& d : dims) EXPECT_EQ(d.extent, d.dim) << d.name;
}
