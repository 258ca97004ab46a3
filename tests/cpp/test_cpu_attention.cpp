// The cpu target's fused_attention kernel (attention_avx2.cpp) against ref:
// sequence lengths that leave partial 16-column panels and 6-row blocks,
// odd head sizes, batches, and each way the kernel reads a mask (rows in
// place, one row for all, strided columns gathered per tile, a constant
// causal mask whose masked key columns are skipped), keys given as rows.
#include <limits>

#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

struct attention_case {
    std::size_t batch, heads, sq, sk, d, dv;
};

enum class mask_kind { none, rows, one_row, transposed, causal };

// With keys_as_rows, kt is a transposed view of k [batch, heads, sk, d],
// each of its columns (a key) contiguous.
program attention_program(const attention_case& c, mask_kind kind, bool keys_as_rows = false) {
    program p;
    module& m = *p.get_main_module();
    auto q = m.add_parameter("q", float_shape({c.batch, c.heads, c.sq, c.d}));
    auto kt = keys_as_rows ? m.add_instruction(make_op("transpose", value_map{{"permutation", ints({0, 1, 3, 2})}}),
                                               {m.add_parameter("k", float_shape({c.batch, c.heads, c.sk, c.d}))})
                           : m.add_parameter("kt", float_shape({c.batch, c.heads, c.d, c.sk}));
    auto v = m.add_parameter("v", float_shape({c.batch, c.heads, c.sk, c.dv}));
    std::vector<instruction_ref> inputs{q, kt, v};
    switch (kind) {
        case mask_kind::none:
            break;
        case mask_kind::rows:
            inputs.push_back(m.add_parameter("mask", float_shape({c.batch, 1, c.sq, c.sk})));
            break;
        case mask_kind::one_row:
            inputs.push_back(m.add_parameter("mask", float_shape({c.batch, 1, 1, c.sk})));
            break;
        case mask_kind::transposed: {
            auto keys_first = m.add_parameter("mask", float_shape({1, 1, c.sk, c.sq}));
            inputs.push_back(
                m.add_instruction(make_op("transpose", value_map{{"permutation", ints({0, 1, 3, 2})}}), {keys_first}));
            break;
        }
        case mask_kind::causal: {
            std::vector<float> mask(c.sq * c.sk);
            for (std::size_t i = 0; i < c.sq; ++i)
                for (std::size_t j = 0; j < c.sk; ++j)
                    mask[i * c.sk + j] = j > i + (c.sk - c.sq) ? -std::numeric_limits<float>::infinity() : 0.0f;
            inputs.push_back(add_float_literal(m, {1, 1, c.sq, c.sk}, mask));
            break;
        }
    }
    const bool has_mask = kind != mask_kind::none;
    m.add_return({m.add_instruction(
        make_op("fused_attention", value_map{{"scale", 0.7}, {"has_mask", has_mask}, {"nan_to_zero", true}}), inputs)});
    return p;
}

}  // namespace

TEST(cpu_attention, vit_length_197_without_mask) {
    expect_cpu_matches_ref(attention_program({1, 2, 197, 197, 64, 64}, mask_kind::none), 2e-5);
}

TEST(cpu_attention, seven_tokens_odd_head_sizes_and_a_batch) {
    for (auto kind : {mask_kind::none, mask_kind::rows, mask_kind::one_row})
        expect_cpu_matches_ref(attention_program({3, 2, 7, 7, 33, 17}, kind), 2e-5);
}

TEST(cpu_attention, mask_rows_per_batch_entry) {
    expect_cpu_matches_ref(attention_program({2, 3, 50, 41, 64, 24}, mask_kind::rows), 2e-5);
}

TEST(cpu_attention, mask_with_strided_columns) {
    expect_cpu_matches_ref(attention_program({2, 2, 37, 45, 16, 8}, mask_kind::transposed), 2e-5);
}

TEST(cpu_attention, constant_causal_mask) {
    expect_cpu_matches_ref(attention_program({2, 3, 37, 45, 16, 8}, mask_kind::causal), 2e-5);
    expect_cpu_matches_ref(attention_program({1, 2, 128, 128, 64, 64}, mask_kind::causal), 2e-5);
}

// Panels of 16 keys packed from rows of d = 64 and d = 33 (not a multiple of
// 8), and a partial last panel (45 keys).
TEST(cpu_attention, keys_read_as_a_transposed_view) {
    expect_cpu_matches_ref(attention_program({2, 3, 37, 45, 64, 16}, mask_kind::rows, true), 2e-5);
    expect_cpu_matches_ref(attention_program({1, 2, 20, 45, 33, 8}, mask_kind::none, true), 2e-5);
}
