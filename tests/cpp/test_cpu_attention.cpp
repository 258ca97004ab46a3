// The cpu target's fused_attention kernels (attention_avx512.cpp where the
// CPU has AVX-512, and attention_avx2.cpp, forced with KILN_CPU_ISA=avx2)
// against ref:
// sequence lengths that leave partial 16-column panels and 6-row blocks,
// odd head sizes, batches, and each way the kernel reads a mask (rows in
// place, one row for all, strided columns gathered per tile, a constant
// causal mask whose masked key columns are skipped), keys given as rows.
#include <limits>

#include "pass_test_helpers.hpp"
#include "scoped_env.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"

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


std::string attention_algorithm(const program& p) {
    program compiled = p;
    compiled.compile(get_target("cpu"));
    for (const auto& choice : compiled.kernel_choices())
        if (choice.op == "fused_attention") return choice.algorithm;
    return "none";
}

// The AVX-512 loops (on a CPU that has them; the AVX2 ones elsewhere), then
// the AVX2 loops forced, each against ref.
void expect_each_isa_matches_ref(const program& p, double tol) {
    {
        const std::string expected = avx512::supported() ? "attention_avx512" : "attention_avx2";
        SCOPED_TRACE(expected);
        EXPECT_EQ(attention_algorithm(p), expected);
        expect_cpu_matches_ref(p, tol);
    }
    {
        scoped_env forced("KILN_CPU_ISA", "avx2");
        SCOPED_TRACE("KILN_CPU_ISA=avx2");
        EXPECT_EQ(attention_algorithm(p), "attention_avx2");
        expect_cpu_matches_ref(p, tol);
    }
}

}  // namespace

TEST(cpu_attention, vit_length_197_without_mask) {
    expect_each_isa_matches_ref(attention_program({1, 2, 197, 197, 64, 64}, mask_kind::none), 2e-5);
}

TEST(cpu_attention, seven_tokens_odd_head_sizes_and_a_batch) {
    for (auto kind : {mask_kind::none, mask_kind::rows, mask_kind::one_row})
        expect_each_isa_matches_ref(attention_program({3, 2, 7, 7, 33, 17}, kind), 2e-5);
}

TEST(cpu_attention, mask_rows_per_batch_entry) {
    expect_each_isa_matches_ref(attention_program({2, 3, 50, 41, 64, 24}, mask_kind::rows), 2e-5);
}

TEST(cpu_attention, mask_with_strided_columns) {
    expect_each_isa_matches_ref(attention_program({2, 2, 37, 45, 16, 8}, mask_kind::transposed), 2e-5);
}

TEST(cpu_attention, constant_causal_mask) {
    expect_each_isa_matches_ref(attention_program({2, 3, 37, 45, 16, 8}, mask_kind::causal), 2e-5);
    expect_each_isa_matches_ref(attention_program({1, 2, 128, 128, 64, 64}, mask_kind::causal), 2e-5);
}

// Panels of 16 keys packed from rows of d = 64 and d = 33 (not a multiple of
// 8), and a partial last panel (45 keys).
TEST(cpu_attention, keys_read_as_a_transposed_view) {
    expect_each_isa_matches_ref(attention_program({2, 3, 37, 45, 64, 16}, mask_kind::rows, true), 2e-5);
    expect_each_isa_matches_ref(attention_program({1, 2, 20, 45, 33, 8}, mask_kind::none, true), 2e-5);
}

// Value widths that leave the AVX-512 kernel's pairs of panels with a single
// panel over (40 = 16 + 16 + 8, 17, 1), one query or one key, and d = 1.
TEST(cpu_attention, single_panels_single_rows_and_single_keys) {
    expect_each_isa_matches_ref(attention_program({2, 2, 13, 29, 24, 40}, mask_kind::rows), 2e-5);
    expect_each_isa_matches_ref(attention_program({1, 3, 1, 50, 64, 17}, mask_kind::one_row), 2e-5);
    expect_each_isa_matches_ref(attention_program({1, 2, 9, 1, 8, 1}, mask_kind::none), 2e-5);
    expect_each_isa_matches_ref(attention_program({1, 1, 31, 33, 1, 48}, mask_kind::causal), 2e-5);
}
