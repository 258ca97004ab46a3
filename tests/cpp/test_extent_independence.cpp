// first_difference_besides_extents: two optimised static copies of one
// dynamic program are the same graph but for their lengths, or the first
// instruction whose op, attributes, inputs or constants differ is named.
#include <gtest/gtest.h>

#include <memory>

#include "ir/extent_independence.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// x [n, 4] -> relu(x) * scale, scale a [1, 4] literal (broadcast by mul).
std::unique_ptr<module> scaled_rows(std::size_t n, float scale) {
    auto m = std::make_unique<module>();
    auto x = m->add_parameter("x", shape{dtype::float_type, {n, 4}});
    auto s = m->add_literal(literal(shape{dtype::float_type, {1, 4}}, std::vector<float>(4, scale)));
    auto r = m->add_instruction(make_op("relu"), {x});
    m->add_return({m->add_instruction(make_op("mul"), {r, s})});
    return m;
}

// x [n, 4] -> reshape to `dims`.
std::unique_ptr<module> reshaped(std::size_t n, std::vector<std::int64_t> dims) {
    auto m = std::make_unique<module>();
    auto x = m->add_parameter("x", shape{dtype::float_type, {n, 4}});
    m->add_return({m->add_instruction(make_op("reshape", value_map{{"dims", ints(std::move(dims))}}), {x})});
    return m;
}

}  // namespace

TEST(extent_independence, the_same_graph_at_two_lengths_has_no_difference) {
    EXPECT_EQ(first_difference_besides_extents(*scaled_rows(64, 2.0f), *scaled_rows(1, 2.0f)), "");
}

TEST(extent_independence, a_constant_folded_from_the_extent_is_named) {
    const std::string why = first_difference_besides_extents(*scaled_rows(64, 64.0f), *scaled_rows(1, 1.0f));
    EXPECT_NE(why.find("@literal"), std::string::npos) << why;
    EXPECT_NE(why.find("depends on the extent"), std::string::npos) << why;
}

TEST(extent_independence, an_attribute_that_holds_the_extent_is_named) {
    const std::string why = first_difference_besides_extents(*reshaped(64, {64, 2, 2}), *reshaped(3, {3, 2, 2}));
    EXPECT_NE(why.find("reshape"), std::string::npos) << why;
    EXPECT_NE(why.find("attributes differ"), std::string::npos) << why;
}

TEST(extent_independence, another_graph_is_named) {
    module other;
    auto x = other.add_parameter("x", shape{dtype::float_type, {3, 4}});
    other.add_return({other.add_instruction(make_op("relu"), {x})});
    EXPECT_NE(first_difference_besides_extents(*scaled_rows(64, 2.0f), other).find("instructions"), std::string::npos);
    // Same size, other parameter name.
    auto renamed = reshaped(3, {3, 2, 2});
    module named_y;
    auto y = named_y.add_parameter("y", shape{dtype::float_type, {3, 4}});
    named_y.add_return({named_y.add_instruction(make_op("reshape", value_map{{"dims", ints({3, 2, 2})}}), {y})});
    EXPECT_NE(first_difference_besides_extents(*renamed, named_y).find("another parameter"), std::string::npos);
}

namespace {

// x [n, 16, 8] -> its first row of each entry: slice [n, 1, 8], a view that
// is standard at n = 1 only, then relu; `transposed` reads it as [n, 8, 1] instead.
std::unique_ptr<module> first_rows(std::size_t n, bool transposed = false) {
    auto m = std::make_unique<module>();
    auto x = m->add_parameter("x", shape{dtype::float_type, {n, 16, 8}});
    instruction_ref v = m->add_instruction(
        make_op("slice", value_map{{"axes", ints({1})}, {"starts", ints({0})}, {"ends", ints({1})}}), {x});
    if (transposed) v = m->add_instruction(make_op("transpose", value_map{{"permutation", ints({0, 2, 1})}}), {v});
    m->add_return({m->add_instruction(make_op("relu"), {v})});
    return m;
}

}  // namespace

TEST(extent_independence, a_view_standard_only_at_batch_one_is_the_same_layout) {
    // [1, 1, 8] has strides {128, 8, 1} against {128, 128, 1} at batch 64:
    // only dimensions of one element differ, which no stride of theirs reaches.
    EXPECT_EQ(first_difference_besides_extents(*first_rows(64), *first_rows(1)), "");
    EXPECT_EQ(first_difference_besides_extents(*first_rows(64, true), *first_rows(1, true)), "");
}

namespace {

// x [1, n, 4] + positions: the rows 0..n-1 of a [16, 4] table, folded into
// a [1, n, 4] constant as BERT's position embeddings are. `shift` reads the
// table from row `shift` on instead.
std::unique_ptr<module> with_positions(std::size_t n, std::size_t shift = 0) {
    std::vector<float> table;
    for (std::size_t i = shift; i < shift + n; ++i)
        for (std::size_t j = 0; j < 4; ++j) table.push_back(static_cast<float>(i * 10 + j));
    auto m = std::make_unique<module>();
    auto x = m->add_parameter("x", shape{dtype::float_type, {1, n, 4}});
    auto positions = m->add_literal(literal(shape{dtype::float_type, {1, n, 4}}, table));
    m->add_return({m->add_instruction(make_op("add"), {x, positions})});
    return m;
}

}  // namespace

TEST(extent_independence, a_constant_cut_short_at_the_smaller_extent_follows_it_when_allowed) {
    bool literals_vary = false;
    EXPECT_EQ(first_difference_besides_extents(*with_positions(16), *with_positions(3), &literals_vary), "");
    EXPECT_TRUE(literals_vary);
    // Without the flag it is a constant that depends on the extent, as before.
    EXPECT_NE(first_difference_besides_extents(*with_positions(16), *with_positions(3)).find("depends on the extent"),
              std::string::npos);
    // Values that are not the leading part (positions from 1 on) are named.
    literals_vary = false;
    EXPECT_NE(first_difference_besides_extents(*with_positions(16), *with_positions(3, 1), &literals_vary)
                  .find("depends on the extent"),
              std::string::npos);
}

TEST(extent_independence, a_leading_part_is_shorter_in_one_dimension_and_equal_there) {
    auto values = [](std::vector<std::size_t> lens, std::vector<float> v) {
        return literal(shape{dtype::float_type, std::move(lens)}, std::move(v));
    };
    const literal whole = values({2, 3}, {1, 2, 3, 4, 5, 6});
    EXPECT_TRUE(is_leading_part_of(values({2, 2}, {1, 2, 4, 5}), whole));   // the first two of each row
    EXPECT_TRUE(is_leading_part_of(values({1, 3}, {1, 2, 3}), whole));      // the first row
    EXPECT_FALSE(is_leading_part_of(values({2, 2}, {2, 3, 5, 6}), whole));  // the last two
    EXPECT_FALSE(is_leading_part_of(values({1, 2}, {1, 2}), whole));        // shorter in two dimensions
    EXPECT_FALSE(is_leading_part_of(whole, whole));                         // not shorter
    EXPECT_FALSE(is_leading_part_of(values({2, 3}, {1, 2, 3, 4, 5, 6}), values({3, 2}, {1, 2, 3, 4, 5, 6})));
}

TEST(extent_independence, reshapes_written_differently_that_agree_at_the_smaller_extent_are_the_same) {
    auto unsqueezed = [](std::size_t seq, std::vector<std::int64_t> dims) {
        auto m = std::make_unique<module>();
        auto x = m->add_parameter("x", shape{dtype::float_type, {1, seq}});
        m->add_return({m->add_instruction(make_op("reshape", value_map{{"dims", ints(std::move(dims))}}), {x})});
        return m;
    };
    // At a sequence of one, [0, 0, -1, 1] is what [0, 1, 1, -1] does.
    EXPECT_EQ(first_difference_besides_extents(*unsqueezed(64, {0, 1, 1, -1}), *unsqueezed(1, {0, 0, -1, 1})), "");
    // Not at two: the lengths would land elsewhere.
    EXPECT_NE(first_difference_besides_extents(*unsqueezed(64, {0, 1, 1, -1}), *unsqueezed(2, {0, 0, -1, 1}))
                  .find("attributes differ"),
              std::string::npos);
}

namespace {

// Hands over `m`'s first literal to a holder that restores it and counts the restores.
void hand_over_first_literal(const module& m, int& restores) {
    for (const auto& ins : m) {
        if (!ins.is_literal()) continue;
        const argument values = ins.get_literal().get_argument();
        ins.get_literal().hand_over([values, &restores] {
            ++restores;
            return values.contiguous();
        });
        return;
    }
}

}  // namespace

// A ranged compile optimises copies of one source at several extents and
// lowers one of them, whose kernels take over the shared weights: comparing
// the copies must not restore (unpack) them, 500 MB at a time for GPT-2.
TEST(extent_independence, copies_of_a_handed_over_literal_are_equal_without_restoring_it) {
    auto at_max = scaled_rows(64, 2.0f);
    module at_min = *at_max;  // shares the literal's storage, as imported copies do
    int restores = 0;
    hand_over_first_literal(*at_max, restores);
    EXPECT_EQ(first_difference_besides_extents(*at_max, at_min), "");
    EXPECT_EQ(restores, 0);
    // A literal of its own with other values is still told apart (its values read).
    auto other = scaled_rows(64, 3.0f);
    EXPECT_NE(first_difference_besides_extents(*at_max, *other), "");
}
