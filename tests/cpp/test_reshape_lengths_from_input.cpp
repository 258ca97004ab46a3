// write_reshape_lengths_copied_from_input: a reshape target length equal to
// the input's at the same position becomes 0 (copy it), and the first length
// then left -1 (what the others leave) unless one is -1 already, so that the
// same reshape fits every extent of a dynamic dimension; the result is unchanged.
#include <gtest/gtest.h>

#include <memory>

#include "ir/reshape_lengths_from_input.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// x [n, 16, 64] -> reshape to `dims`; returns the module.
std::unique_ptr<module> reshaped(std::size_t n, std::vector<std::int64_t> dims) {
    auto m = std::make_unique<module>();
    auto x = m->add_parameter("x", float_shape({n, 16, 64}));
    m->add_return({m->add_instruction(make_op("reshape", value_map{{"dims", ints(std::move(dims))}}), {x})});
    return m;
}

std::string reshape_of(const module& m) {
    for (const auto& ins : m)
        if (ins.name() == "reshape") return to_string(ins.get_operator());
    return {};
}

}  // namespace

TEST(reshape_lengths_from_input, the_batch_and_sequence_are_copied_at_every_batch) {
    // BERT's [batch, seq, -1, 64] split of the heads.
    for (std::size_t n : {1, 3, 8}) {
        auto owned = reshaped(n, {static_cast<std::int64_t>(n), 16, -1, 16});
        module& m = *owned;
        const module before(m);
        EXPECT_EQ(write_reshape_lengths_copied_from_input(m), 1u);
        EXPECT_EQ(reshape_of(m), "reshape[dims={0, 0, -1, 16}]") << n;
        EXPECT_EQ(m.get_output_shapes(), before.get_output_shapes());
        expect_same_outputs(before, m);
    }
}

TEST(reshape_lengths_from_input, a_batch_folded_into_the_rows_is_what_the_others_leave) {
    // GPT-2's [batch * seq, 64] before a product: the same reshape at every batch.
    for (std::size_t n : {1, 3, 8}) {
        auto owned = reshaped(n, {static_cast<std::int64_t>(n * 16), 64});
        module& m = *owned;
        const module before(m);
        EXPECT_EQ(write_reshape_lengths_copied_from_input(m), 1u);
        EXPECT_EQ(reshape_of(m), "reshape[dims={-1, 64}]") << n;
        EXPECT_EQ(m.get_output_shapes(), before.get_output_shapes());
        expect_same_outputs(before, m);
    }
}

TEST(reshape_lengths_from_input, the_first_length_not_copied_becomes_the_rest) {
    // [2, 16, 64] -> [16, 2, 64]: 64 is copied, 16 is what 2 and 64 leave.
    auto owned = reshaped(2, {16, 2, 64});
    module& m = *owned;
    EXPECT_EQ(write_reshape_lengths_copied_from_input(m), 1u);
    EXPECT_EQ(reshape_of(m), "reshape[dims={-1, 2, 0}]");
}

TEST(reshape_lengths_from_input, a_reshape_with_a_rest_and_nothing_copied_stays) {
    auto owned = reshaped(4, {-1, 1024});
    module& m = *owned;
    EXPECT_EQ(write_reshape_lengths_copied_from_input(m), 0u);
    EXPECT_EQ(reshape_of(m), "reshape[dims={-1, 1024}]");
}

TEST(reshape_lengths_from_input, inserted_unit_dimensions_are_not_the_rest) {
    // transformers' padding mask [1, seq] -> [1, 1, 1, seq]: the same reshape at every seq.
    for (std::size_t seq : {2u, 7u, 512u}) {
        module m;
        auto x = m.add_parameter("x", float_shape({1, seq}));
        m.add_return({m.add_instruction(
            make_op("reshape", value_map{{"dims", ints({1, 1, 1, static_cast<std::int64_t>(seq)})}}), {x})});
        const module before = m;
        EXPECT_EQ(write_reshape_lengths_copied_from_input(m), 1u);
        EXPECT_EQ(reshape_of(m), "reshape[dims={0, 1, 1, -1}]") << seq;
        expect_same_outputs(before, m);
    }
}
