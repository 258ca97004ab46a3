// constant_propagation stores a constant that repeats along a dimension its
// pointwise readers broadcast once along it (passes/repeated_constants.hpp):
// a literal, or a folded frontier too large to store whole (BERT's token-type
// embeddings of all-zero token types, [batch, seq, width] rows of one
// vector). Outputs stay those of the unoptimised module (ref).
#include <gtest/gtest.h>

#include <functional>

#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

std::vector<std::vector<std::size_t>> literal_lens(const module& m) {
    std::vector<std::vector<std::size_t>> out;
    for (const auto& ins : m)
        if (ins.is_literal()) out.push_back(ins.get_shape().lens());
    return out;
}

}  // namespace

TEST(pass_repeated_constants, a_literal_with_equal_rows_added_to_rows_is_stored_once) {
    module m;
    auto x = m.add_parameter("x", float_shape({4, 3}));
    auto c = add_float_literal(m, {4, 3}, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
    m.add_return({m.add_instruction(make_op("add"), {x, c})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(literal_lens(out), (std::vector<std::vector<std::size_t>>{{1, 3}})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_repeated_constants, every_repeated_dimension_the_readers_broadcast_goes) {
    // c [2, 3, 4] is one value everywhere along dims 0 and 1; x gives both lengths.
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4}));
    std::vector<float> values;
    for (int i = 0; i < 6; ++i) values.insert(values.end(), {0.5f, -1.0f, 2.0f, 7.0f});
    auto c = add_float_literal(m, {2, 3, 4}, values);
    m.add_return({m.add_instruction(make_op("mul"), {x, c})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(literal_lens(out), (std::vector<std::vector<std::size_t>>{{1, 1, 4}})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_repeated_constants, rows_that_differ_stay) {
    module m;
    auto x = m.add_parameter("x", float_shape({3, 2}));
    auto c = add_float_literal(m, {3, 2}, {1, 2, 1, 2, 1, 2.5f});
    m.add_return({m.add_instruction(make_op("add"), {x, c})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(literal_lens(out), (std::vector<std::vector<std::size_t>>{{3, 2}})) << out;
}

TEST(pass_repeated_constants, a_dimension_no_other_input_gives_stays) {
    // x [1, 3] + c [4, 3]: the result's 4 rows come from c alone.
    module m;
    auto x = m.add_parameter("x", float_shape({1, 3}));
    auto c = add_float_literal(m, {4, 3}, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
    m.add_return({m.add_instruction(make_op("add"), {x, c})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(literal_lens(out), (std::vector<std::vector<std::size_t>>{{4, 3}})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_repeated_constants, a_reader_that_is_not_pointwise_keeps_it_whole) {
    // The same literal is a product's weights: a dot does not broadcast it.
    module m;
    auto x = m.add_parameter("x", float_shape({3, 3}));
    auto c = add_float_literal(m, {3, 3}, {1, 2, 3, 1, 2, 3, 1, 2, 3});
    auto sum = m.add_instruction(make_op("add"), {x, c});
    m.add_return({m.add_instruction(make_op("dot"), {sum, c})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(literal_lens(out), (std::vector<std::vector<std::size_t>>{{3, 3}})) << out;
}

TEST(pass_repeated_constants, a_frontier_too_large_to_store_whole_is_stored_once) {
    // gather(table, zeros [64, 32]) is [64, 32, 64] floats (512 KiB), more
    // than the table and indices it comes from: not worth storing whole, but
    // every row is table row 0, so it folds to [1, 1, 64].
    module m;
    auto x = m.add_parameter("x", float_shape({64, 32, 64}));
    auto table = add_random_literal(m, {2, 64}, 3);
    auto zeros = m.add_literal(literal(shape{dtype::int64_type, {64, 32}}, std::vector<std::int64_t>(64 * 32, 0)));
    auto rows = m.add_instruction(make_op("gather", value_map{{"axis", 0}}), {table, zeros});
    m.add_return({m.add_instruction(make_op("add"), {x, rows})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"add"}) << out;
    EXPECT_EQ(literal_lens(out), (std::vector<std::vector<std::size_t>>{{1, 1, 64}})) << out;
    expect_same_outputs(m, out);
}

namespace {

// x [batch, 32, 16] + (gather(table, token types [batch, 32]) + positions
// [1, 32, 16]): BERT's embeddings with token types folded from the ids' shape.
module embeddings(std::size_t batch, std::int64_t token_type) {
    module m;
    auto x = m.add_parameter("x", float_shape({batch, 32, 16}));
    auto table = add_random_literal(m, {2, 16}, 3);
    auto types = m.add_literal(
        literal(shape{dtype::int64_type, {batch, 32}}, std::vector<std::int64_t>(batch * 32, token_type)));
    auto rows = m.add_instruction(make_op("gather", value_map{{"axis", 0}}), {table, types});
    auto positions = add_random_literal(m, {1, 32, 16}, 4);
    auto both = m.add_instruction(make_op("add"), {rows, positions});
    m.add_return({m.add_instruction(make_op("add"), {x, both})});
    return module(m);
}

}  // namespace

TEST(pass_repeated_constants, a_frontier_above_the_size_limit_is_computed_narrowed) {
    // Whole, the folded embeddings are [batch, 32, 16] (16 KiB at batch 8),
    // above the limit: they are computed from the one table row the token
    // types pick, [1, 32, 16] (2 KiB), at a batch under the limit and above
    // it alike, so that both fold to the same literal.
    constant_propagation limited;
    limited.max_bytes = 4096;
    for (std::size_t batch : {1, 8}) {
        module m = embeddings(batch, 1);
        module out = after_pass(m, limited);
        EXPECT_EQ(op_names(out), std::vector<std::string>{"add"}) << out;
        EXPECT_EQ(literal_lens(out), (std::vector<std::vector<std::size_t>>{{1, 32, 16}})) << out;
        expect_same_outputs(m, out);
    }
}

namespace {

// x [8, 32, 16] + gather(table [2, 16], the token types `types(m)` make).
module rows_of_types(const std::function<instruction_ref(module&)>& types) {
    module m;
    auto x = m.add_parameter("x", float_shape({8, 32, 16}));
    auto table = add_random_literal(m, {2, 16}, 3);
    auto rows = m.add_instruction(make_op("gather", value_map{{"axis", 0}}), {table, types(m)});
    m.add_return({m.add_instruction(make_op("add"), {x, rows})});
    return module(m);
}

}  // namespace

TEST(pass_repeated_constants, above_the_size_limit_indices_that_differ_keep_their_gather) {
    // Token types that differ along both the batch and the sequence repeat
    // along nothing the readers broadcast: above the limit nothing folds.
    constant_propagation limited;
    limited.max_bytes = 4096;
    module m = rows_of_types([](module& mm) {
        std::vector<std::int64_t> types(8 * 32, 0);
        for (std::size_t i = 0; i < types.size(); i += 3) types[i] = 1;  // rows of 32 start at other phases
        return mm.add_literal(literal(shape{dtype::int64_type, {8, 32}}, types));
    });
    module out = after_pass(m, limited);
    EXPECT_EQ(count_ops(out, "gather"), 1u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_repeated_constants, indices_broadcast_over_the_batch_are_narrowed_too) {
    // torch's exports keep BERT's token types as a [1, 32] buffer of zeros
    // broadcast to [batch, 32]: above the limit the embeddings still fold
    // to the one row they repeat.
    constant_propagation limited;
    limited.max_bytes = 4096;
    module m = rows_of_types([](module& mm) {
        auto zeros = mm.add_literal(literal(shape{dtype::int64_type, {1, 32}}, std::vector<std::int64_t>(32, 0)));
        return mm.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({8, 32})}}), {zeros});
    });
    module out = after_pass(m, limited);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"add"}) << out;
    EXPECT_EQ(literal_lens(out), (std::vector<std::vector<std::size_t>>{{1, 1, 16}})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_repeated_constants, two_inputs_narrowed_along_one_dim_keep_their_readers_lengths) {
    // GPT-2's causal mask compares positions gathered for keys [8, 1, 32]
    // and for queries [8, 32, 1]; each alone repeats along the batch, which
    // the comparison broadcasts against the other. Above the limit both are
    // computed narrowed, and the one narrowed second is broadcast back so
    // that the comparison still has the batch (its result [8, 32, 32]).
    constant_propagation limited;
    limited.max_bytes = 4096;
    module m;
    auto table = add_random_literal(m, {32}, 3);
    auto gathered = [&](std::vector<std::size_t> lens) {
        std::vector<std::int64_t> positions;
        for (std::size_t b = 0; b < 8; ++b)
            for (std::int64_t i = 0; i < 32; ++i) positions.push_back(i);
        auto indices = m.add_literal(literal(shape{dtype::int64_type, std::move(lens)}, positions));
        return m.add_instruction(make_op("gather", value_map{{"axis", 0}}), {table, indices});
    };
    auto future = m.add_instruction(make_op("greater"), {gathered({8, 1, 32}), gathered({8, 32, 1})});
    auto mask = m.add_instruction(make_op("where"),
                                  {future, add_float_literal(m, {}, {-1e9f}), add_float_literal(m, {}, {0.0f})});
    m.add_return({mask});                 // (a reader that broadcasts the batch would take the whole mask narrowed)
    module out = after_pass(m, limited);  // the verifier checks every result's lengths
    EXPECT_EQ(count_ops(out, "gather"), 0u) << out;
    EXPECT_EQ(count_ops(out, "broadcast"), 1u) << out;
    for (const auto& ins : out) {
        if (ins.name() == "greater") {
            EXPECT_EQ(ins.get_shape().lens(), (std::vector<std::size_t>{8, 32, 32})) << out;
        }
    }
    expect_same_outputs(m, out);
}
