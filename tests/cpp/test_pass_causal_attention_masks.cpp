// A constant causal mask becomes fused_attention's causal flag
// (passes/causal_attention_masks.cpp), and the op and the cpu kernel mask by
// position as the mask did.
#include <limits>

#include "ops/fused_attention.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

module fused_with_causal_flags(const module& m) {
    return after_passes(m, {std::make_shared<fuse_attention>(), std::make_shared<causal_attention_masks>()});
}

// Key j visible from query i of sq when j <= i + sk - sq.
bool visible(std::size_t i, std::size_t j, std::size_t sq, std::size_t sk) {
    return j + sq <= i + sk;
}

// An additive mask [batch, 1, sq, sk]: 0 where `keep(b, i, j)`, `masked` elsewhere.
template <class Keep>
std::vector<float> additive_mask(std::size_t batch, std::size_t sq, std::size_t sk, float masked, Keep keep) {
    std::vector<float> values;
    for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t i = 0; i < sq; ++i)
            for (std::size_t j = 0; j < sk; ++j) values.push_back(keep(b, i, j) ? 0.0f : masked);
    return values;
}

// softmax(q @ kt * 0.3 + mask) @ v over [2, 3] heads, the mask built by `make_mask`.
template <class MakeMask>
program attention_with(std::size_t sq, std::size_t sk, MakeMask make_mask) {
    program p;
    module& m = *p.get_main_module();
    auto q = m.add_parameter("q", float_shape({2, 3, sq, 8}));
    auto kt = m.add_parameter("kt", float_shape({2, 3, 8, sk}));
    auto v = m.add_parameter("v", float_shape({2, 3, sk, 5}));
    auto scores = add(m, "mul", {add(m, "dot", {q, kt}), add_float_literal(m, {}, {0.3f})});
    auto p_ = add(m, "softmax", {add(m, "add", {scores, make_mask(m)})}, value_map{{"axis", -1}});
    m.add_return({add(m, "dot", {p_, v})});
    return p;
}

program with_constant_mask(std::size_t batch, std::size_t sq, std::size_t sk, const std::vector<float>& mask) {
    return attention_with(sq, sk, [&](module& m) { return add_float_literal(m, {batch, 1, sq, sk}, mask); });
}

const op::fused_attention& only_attention(const module& m) {
    for (const auto& ins : m)
        if (const auto* a = ins.get_operator().get_if<op::fused_attention>()) return *a;
    throw std::runtime_error("no fused_attention");
}

}  // namespace

TEST(pass_causal_attention_masks, a_constant_causal_mask_becomes_the_flag) {
    const float lowest = std::numeric_limits<float>::lowest();
    const float minus_inf = -std::numeric_limits<float>::infinity();
    // One tile of 16 query rows and several, a cache longer than the queries, one query.
    for (auto [sq, sk] : {std::pair<std::size_t, std::size_t>{11, 11}, {40, 40}, {70, 70}, {5, 21}, {17, 50}, {1, 9}}) {
        for (float masked : {lowest, minus_inf}) {
            SCOPED_TRACE(std::to_string(sq) + " x " + std::to_string(sk) + ", masked " + std::to_string(masked));
            const program p = with_constant_mask(1, sq, sk, additive_mask(1, sq, sk, masked, [&](auto, auto i, auto j) {
                                                     return visible(i, j, sq, sk);
                                                 }));
            const module out = fused_with_causal_flags(*p.get_main_module());
            EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_attention"}) << out;
            EXPECT_TRUE(only_attention(out).causal) << out;
            EXPECT_FALSE(only_attention(out).has_mask) << out;
            for (const auto& ins : out) EXPECT_TRUE(!ins.is_literal() || ins.get_shape().elements() == 1) << out;
            expect_same_outputs(*p.get_main_module(), out, 1e-5);
            expect_cpu_matches_ref(p, 1e-5);
        }
    }
}

TEST(pass_causal_attention_masks, the_where_of_a_boolean_mask_exporters_write_is_read_too) {
    // GPT-2's ONNX export: Where(causal, 0, lowest), the boolean mask a literal.
    const std::size_t s = 23;
    std::vector<double> keep;
    for (std::size_t i = 0; i < s; ++i)
        for (std::size_t j = 0; j < s; ++j) keep.push_back(j <= i ? 1 : 0);
    const program p = attention_with(s, s, [&](module& m) {
        auto allowed = m.add_literal(literal(shape(dtype::bool_type, {1, 1, s, s}), keep));
        return add(m, "where",
                   {allowed, add_float_literal(m, {}, {0.0f}),
                    add_float_literal(m, {}, {std::numeric_limits<float>::lowest()})});
    });
    const module out = fused_with_causal_flags(*p.get_main_module());
    EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_attention"}) << out;
    EXPECT_TRUE(only_attention(out).causal) << out;
    expect_same_outputs(*p.get_main_module(), out, 1e-5);
    expect_cpu_matches_ref(p, 1e-5);
}

TEST(pass_causal_attention_masks, other_masks_stay_masks) {
    const float lowest = std::numeric_limits<float>::lowest();
    const std::size_t sq = 6, sk = 9;
    auto causal = [&](std::size_t i, std::size_t j) { return visible(i, j, sq, sk); };
    struct variant {
        const char* what;
        std::size_t batch;
        std::vector<float> mask;
    };
    const std::vector<variant> variants = {
        {"a finite mask the softmax weighs (-1e4)", 1,
         additive_mask(1, sq, sk, -1e4f, [&](auto, auto i, auto j) { return causal(i, j); })},
        {"causal with a padded key", 1,
         additive_mask(1, sq, sk, lowest, [&](auto, auto i, auto j) { return causal(i, j) && j != 2; })},
        {"aligned at the top left (j <= i)", 1,
         additive_mask(1, sq, sk, lowest, [](auto, auto i, auto j) { return j <= i; })},
        {"causal in one batch entry only", 2,
         additive_mask(2, sq, sk, lowest, [&](auto b, auto i, auto j) { return causal(i, j) || b == 1; })},
    };
    for (const auto& v : variants) {
        SCOPED_TRACE(v.what);
        const program p = with_constant_mask(v.batch, sq, sk, v.mask);
        const module out = fused_with_causal_flags(*p.get_main_module());
        EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_attention"}) << out;
        EXPECT_FALSE(only_attention(out).causal) << out;
        EXPECT_TRUE(only_attention(out).has_mask) << out;
        expect_same_outputs(*p.get_main_module(), out, 1e-5);
    }
    // Attention fusion alone keeps the mask (the gpu target's kernel reads masks only).
    const program p = with_constant_mask(
        1, sq, sk, additive_mask(1, sq, sk, lowest, [&](auto, auto i, auto j) { return causal(i, j); }));
    EXPECT_TRUE(only_attention(after_pass<fuse_attention>(*p.get_main_module())).has_mask);
}

TEST(fused_attention_op, causal_needs_as_many_keys_as_queries) {
    op::fused_attention a;
    a.causal = true;
    const std::vector<shape> inputs = {float_shape({2, 9, 4}), float_shape({2, 4, 5}), float_shape({2, 5, 3})};
    try {
        (void)a.compute_shape(inputs);
        FAIL() << "fewer keys than queries accepted";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("at least as many keys as queries, got scores {2, 9, 5}"),
                  std::string::npos)
            << e.what();
    }
}

TEST(pass_causal_attention_masks, a_mask_expanded_over_the_batch_is_read_as_one_matrix) {
    // GPT-2's export expands its positions over the batch before comparing
    // them; above the fold limit constant propagation keeps the comparison
    // and gives it the positions folded whole or unexpanded, by their size
    // ([batch, 1, 1, s] keys, the same row in each, against [1, 1, s, 1]
    // queries broadcast to [batch, 1, s, 1]). One matrix is read, not the
    // batch's.
    const std::size_t s = 40, batch = 2;
    program p = attention_with(s, s, [&](module& m) {
        std::vector<std::int64_t> positions(s);
        for (std::size_t i = 0; i < s; ++i) positions[i] = static_cast<std::int64_t>(i);
        std::vector<std::int64_t> repeated;
        for (std::size_t b = 0; b < batch; ++b) repeated.insert(repeated.end(), positions.begin(), positions.end());
        auto keys = m.add_literal(literal(shape(dtype::int64_type, {batch, 1, 1, s}), repeated));
        auto queries = add(m, "broadcast", {m.add_literal(literal(shape(dtype::int64_type, {1, 1, s, 1}), positions))},
                           value_map{{"out_lens", ints({batch, 1, s, 1})}});
        auto future = add(m, "greater", {keys, queries});
        return add(m, "where",
                   {future, add_float_literal(m, {}, {std::numeric_limits<float>::lowest()}),
                    add_float_literal(m, {}, {0.0f})});
    });
    const module out = fused_with_causal_flags(*p.get_main_module());
    EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_attention"}) << out;
    EXPECT_TRUE(only_attention(out).causal) << out;
    expect_same_outputs(*p.get_main_module(), out, 1e-5);
}
