// literal: values, copies sharing their bytes, and the hand-over of the bytes
// to a holder that restores them on demand.
#include <gtest/gtest.h>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {
shape f32(std::vector<std::size_t> lens) { return {dtype::float_type, std::move(lens)}; }
}  // namespace

TEST(literal, copies_its_input_and_its_copies_share_the_bytes) {
    std::vector<float> values{1, 2, 3, 4};
    argument borrowed(f32({4}), values.data());
    literal copied(borrowed);
    EXPECT_NE(copied.get_argument().data(), borrowed.data());
    values[0] = 9;  // later changes to the source do not reach the literal
    EXPECT_EQ(copied.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
    literal again = copied;
    EXPECT_EQ(again.get_argument().data(), copied.get_argument().data());
}

TEST(literal, hand_over_drops_the_bytes_and_restores_the_same_values) {
    literal lit(f32({2, 2}), std::vector<float>{1, -2, 3.5f, 0});
    literal copy = lit;
    EXPECT_TRUE(lit.holds_bytes());
    // The holder keeps the values its own way (here reversed) and restores them on demand.
    std::vector<float> reversed{0, 3.5f, -2, 1};
    int restores = 0;
    lit.hand_over([&] {
        ++restores;
        argument out(f32({2, 2}));
        for (std::size_t i = 0; i < 4; ++i) out.data_as<float>()[i] = reversed[3 - i];
        return out;
    });
    EXPECT_FALSE(lit.holds_bytes());
    EXPECT_FALSE(copy.holds_bytes());  // copies share the bytes, so they share the hand-over
    EXPECT_EQ(lit.to_vector<float>(), (std::vector<float>{1, -2, 3.5f, 0}));
    EXPECT_EQ(copy.to_vector<float>(), (std::vector<float>{1, -2, 3.5f, 0}));
    EXPECT_EQ(restores, 2);
    EXPECT_EQ(lit.get_shape(), f32({2, 2}));
}

TEST(literal, a_later_hand_over_replaces_the_earlier_one) {
    literal lit(f32({1}), std::vector<float>{5});
    std::vector<int> calls(2, 0);
    auto holder = [&calls](std::size_t which) {
        return [&calls, which] {
            ++calls[which];
            return literal(f32({1}), std::vector<float>{5}).get_argument();
        };
    };
    lit.hand_over(holder(0));
    lit.hand_over(holder(1));
    EXPECT_EQ(lit.to_vector<float>(), std::vector<float>{5});
    EXPECT_EQ(calls, (std::vector<int>{0, 1}));
}

TEST(literal, a_restore_of_the_wrong_shape_is_an_error) {
    literal lit(f32({3}), std::vector<float>{1, 2, 3});
    lit.hand_over([] { return argument(f32({4})); });
    try {
        lit.get_argument();
        FAIL() << "expected an error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("restored as"), std::string::npos) << e.what();
    }
}

TEST(literal, a_module_prints_and_saves_a_handed_over_literal) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({3}));
    auto c = m.add_literal(literal(f32({3}), std::vector<float>{0.5f, -1, 2}));
    m.add_return({m.add_instruction(make_op("add"), {x, c})});
    const std::string printed = to_string(p);
    const std::string saved = save_buffer(p);
    c->get_literal().hand_over([] { return literal(f32({3}), std::vector<float>{0.5f, -1, 2}).get_argument(); });
    EXPECT_FALSE(c->get_literal().holds_bytes());
    EXPECT_EQ(to_string(p), printed);
    EXPECT_EQ(save_buffer(p), saved);
    EXPECT_EQ(p.held_literal_bytes(), 0u);
}
