#include <functional>

#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

operation transpose(std::vector<std::int64_t> perm) {
    return make_op("transpose", value_map{{"permutation", ints(std::move(perm))}});
}
operation reshape(std::vector<std::int64_t> dims) {
    return make_op("reshape", value_map{{"dims", ints(std::move(dims))}});
}

}  // namespace

TEST(pass_simplify_reshapes, cancels_a_transpose_pair) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4}));
    auto t1 = m.add_instruction(transpose({2, 0, 1}), {x});
    auto t2 = m.add_instruction(transpose({1, 2, 0}), {t1});
    m.add_return({m.add_instruction(make_op("relu"), {t2})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "x = @param:x -> float_type, {2, 3, 4}, {12, 4, 1}\n"
              "@1 = relu(x) -> float_type, {2, 3, 4}, {12, 4, 1}\n"
              "@2 = @return(@1)\n");
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, merges_a_transpose_chain_into_one) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4, 5}));
    auto t1 = m.add_instruction(transpose({0, 2, 1, 3}), {x});
    auto t2 = m.add_instruction(transpose({}), {t1});  // reversed
    auto t3 = m.add_instruction(transpose({1, 0, 2, 3}), {t2});
    m.add_return({m.add_instruction(make_op("contiguous"), {t3})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"transpose", "contiguous"})) << out;
    // x dims {0,1,2,3} -> {0,2,1,3} -> {3,1,2,0} -> {1,3,2,0}
    EXPECT_NE(to_string(out).find("transpose[permutation={1, 3, 2, 0}](x)"), std::string::npos) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, merges_reshape_chains_and_drops_no_op_reshapes) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4}));
    auto r1 = m.add_instruction(reshape({6, 4}), {x});
    auto u = m.add_instruction(make_op("unsqueeze", value_map{{"axes", ints({0})}}), {r1});
    auto f = m.add_instruction(make_op("flatten", value_map{{"axis", 2}}), {u});
    auto r2 = m.add_instruction(reshape({24}), {f});
    auto back = m.add_instruction(reshape({2, 3, 4}), {r2});  // the whole chain is a no-op
    auto sum = m.add_instruction(make_op("add"), {back, x});
    auto r3 = m.add_instruction(reshape({4, 6}), {sum});
    auto r4 = m.add_instruction(reshape({1, 24}), {r3});
    m.add_return({r4});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"add", "reshape"})) << out;
    EXPECT_NE(to_string(out).find("reshape[dims={1, 24}](@1)"), std::string::npos) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, keeps_reshape_chains_on_strided_values) {
    module m;
    auto x = m.add_parameter("x", float_shape({3, 4}));
    auto t = m.add_instruction(transpose({1, 0}), {x});
    auto u = m.add_instruction(make_op("unsqueeze", value_map{{"axes", ints({0})}}), {t});  // a strided view
    auto r = m.add_instruction(reshape({12}), {u});                                         // the copy
    m.add_return({r});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"transpose", "unsqueeze", "reshape"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, removes_no_op_contiguous_broadcast_squeeze_and_slice) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto c = m.add_instruction(make_op("contiguous"), {x});
    auto b = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}), {c});
    auto s = m.add_instruction(make_op("squeeze", value_map{{"axes", ints({})}}), {b});
    auto sl = m.add_instruction(
        make_op("slice", value_map{{"axes", ints({1})}, {"starts", ints({0})}, {"ends", ints({100})}}), {s});
    auto partial = m.add_instruction(
        make_op("slice", value_map{{"axes", ints({1})}, {"starts", ints({1})}, {"ends", ints({3})}}), {sl});
    m.add_return({m.add_instruction(make_op("neg"), {sl}), partial});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"slice", "neg"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, merges_broadcast_chains) {
    module m;
    auto x = m.add_parameter("x", float_shape({3}));
    auto b1 = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({4, 3})}}), {x});
    auto b2 = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 4, 3})}}), {b1});
    m.add_return({m.add_instruction(make_op("contiguous"), {b2})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"broadcast", "contiguous"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, converts_a_broadcast_value_before_spreading_it) {
    // A 16-bit bias as quantize_bf16 leaves it: converted to float32 after
    // its broadcast, the size of the product's result.
    module m;
    auto x = m.add_parameter("x", float_shape({2, 4, 3}));
    auto bias = m.add_parameter("bias", shape(dtype::bf16_type, {3}));
    auto spread = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 4, 3})}}), {bias});
    auto widened = m.add_instruction(make_op("convert", value_map{{"target_type", "float_type"}}), {spread});
    m.add_return({m.add_instruction(make_op("add"), {x, widened})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"convert", "broadcast", "add"})) << out;
    EXPECT_NE(to_string(out).find("-> float_type, {3}, {1}"), std::string::npos) << out;  // 3 values converted
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, a_convert_of_a_broadcast_the_return_reads_stays) {
    // The return's shapes may not change: the broadcast view is refused there.
    module m;
    auto bias = m.add_parameter("bias", shape(dtype::bf16_type, {3}));
    auto spread = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}), {bias});
    m.add_return({m.add_instruction(make_op("convert", value_map{{"target_type", "float_type"}}), {spread})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"broadcast", "convert"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, a_cancelled_pair_feeding_the_return_returns_the_input) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({2, 5}));
    auto t1 = m->add_instruction(transpose({1, 0}), {x});
    auto t2 = m->add_instruction(transpose({1, 0}), {t1});
    m->add_return({t2});
    module out = after_pass<simplify_reshapes>(*m);
    EXPECT_TRUE(op_names(out).empty()) << out;
    expect_same_outputs(*m, out);
    expect_cpu_matches_ref(p, 0);
}

namespace {

// The keys' path of transformers' exports, keys k [B, S, 3, 4] ([B, S, H,
// D]): heads split by a transpose, merged to [B * H, S, D], transposed and
// split back to kt [B, H, D, S], which q [B, 3, queries, 4] multiplies.
program keys_path(std::size_t batch, std::size_t queries, std::size_t seq = 5) {
    program p;
    module& m = *p.get_main_module();
    auto k = m.add_parameter("k", float_shape({batch, seq, 3, 4}));
    auto q = m.add_parameter("q", float_shape({batch, 3, queries, 4}));
    auto heads = m.add_instruction(transpose({0, 2, 1, 3}), {k});
    auto k3 = m.add_instruction(reshape({-1, static_cast<std::int64_t>(seq), 4}), {heads});
    auto kt3 = m.add_instruction(transpose({0, 2, 1}), {k3});
    auto kt =
        m.add_instruction(reshape({static_cast<std::int64_t>(batch), 3, 4, static_cast<std::int64_t>(seq)}), {kt3});
    m.add_return({m.add_instruction(make_op("dot"), {q, kt})});
    return p;
}

}  // namespace

// At batch 1 the reshapes only drop and restore the batch dim around the
// second transpose (squeeze and unsqueeze of the strided views), and at a
// sequence of 1 they merge a dim of 1: the same one transpose of the keys
// as at batch 2 (below), so that a program optimised at a range's ends is
// one graph.
TEST(pass_simplify_reshapes, at_a_batch_or_sequence_of_1_the_keys_path_is_one_transpose_too) {
    for (const auto& [batch, seq] : {std::pair<std::size_t, std::size_t>{1, 5}, {2, 1}, {1, 1}}) {
        program p = keys_path(batch, 2, seq);
        const module& m = *p.get_main_module();
        module out = after_pass<simplify_reshapes>(m);
        EXPECT_EQ(op_names(out), (std::vector<std::string>{"transpose", "dot"})) << out;
        for (const auto& ins : out) {
            if (ins.name() != "transpose") continue;
            EXPECT_EQ(to_string(ins.get_operator()), "transpose[permutation={0, 2, 3, 1}]") << out;
        }
        expect_same_outputs(m, out);
        expect_cpu_matches_ref(p);
    }
}

namespace {

// x [2, sequence, 36] cut into q, k, v of [2, sequence, 12] (3 heads of 4),
// each split into heads and transposed, as GPT-2's fused QKV projection is
// exported; `piece(m, x, i)` makes the i-th cut. The three are added (a
// reader that takes any strides).
module qkv_heads(const std::function<instruction_ref(module&, instruction_ref, std::int64_t)>& piece,
                 std::size_t sequence = 5) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, sequence, 36}));
    std::vector<instruction_ref> parts;
    for (std::int64_t i = 0; i < 3; ++i) {
        auto heads = m.add_instruction(reshape({2, static_cast<std::int64_t>(sequence), 3, 4}), {piece(m, x, i)});
        parts.push_back(m.add_instruction(transpose({0, 2, 1, 3}), {heads}));
    }
    auto sum = m.add_instruction(make_op("add"), {parts[0], parts[1]});
    m.add_return({m.add_instruction(make_op("add"), {sum, parts[2]})});
    return module(m);
}

}  // namespace

TEST(pass_simplify_reshapes, at_a_sequence_of_1_split_pieces_become_slices_too) {
    // The pieces' dim of 1 has another stride than x's (any stride serves a
    // dim of 1): the cut is the same, so the reshape is a slice's view as at
    // longer sequences, not a copy at a batch above 1 and a view at 1.
    module m = qkv_heads(
        [](module& mm, instruction_ref x, std::int64_t i) {
            return mm.add_instruction(
                make_op("split", value_map{{"axis", 2}, {"num_outputs", 3}, {"output", i}, {"sizes", ints({})}}), {x});
        },
        1);
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(count_ops(out, "split"), 0u) << out;
    EXPECT_EQ(count_ops(out, "slice"), 3u) << out;
    EXPECT_NE(to_string(out).find("slice[axes={2},starts={6},ends={9},steps={}]"), std::string::npos) << out;
    expect_same_outputs(m, out);
    program p;
    *p.get_main_module() = m;
    expect_cpu_matches_ref(p);
}

TEST(pass_simplify_reshapes, reshapes_of_split_pieces_become_slices_of_one_reshape) {
    module m = qkv_heads([](module& mm, instruction_ref x, std::int64_t i) {
        return mm.add_instruction(
            make_op("split", value_map{{"axis", 2}, {"num_outputs", 3}, {"output", i}, {"sizes", ints({})}}), {x});
    });
    module out = after_pass<simplify_reshapes>(m);
    // Each piece's reshape is the whole [2, 5, 9, 4] cut along its third dim.
    const std::string text = to_string(out);
    EXPECT_EQ(count_ops(out, "split"), 0u) << out;
    EXPECT_EQ(count_ops(out, "slice"), 3u) << out;
    EXPECT_NE(text.find("reshape[dims={2, 5, 9, 4}](x) -> float_type, {2, 5, 9, 4}, {180, 36, 4, 1}"),
              std::string::npos)
        << out;
    EXPECT_NE(text.find("slice[axes={2},starts={3},ends={6},steps={}]"), std::string::npos) << out;
    EXPECT_NE(text.find("transpose[permutation={0, 2, 1, 3}](@"), std::string::npos) << out;
    EXPECT_NE(text.find("-> float_type, {2, 3, 5, 4}, {180, 4, 36, 1}"), std::string::npos) << out;
    for (const auto& ins : out) {
        if (ins.name() == "reshape") {
            EXPECT_TRUE(ins.inputs()[0]->get_shape().standard()) << out;
        }
    }
    expect_same_outputs(m, out);
    program p;
    *p.get_main_module() = m;
    expect_cpu_matches_ref(p);
}

TEST(pass_simplify_reshapes, reshapes_of_slices_become_views_only_where_the_cut_stays_whole) {
    auto sliced = [](std::int64_t start, std::int64_t end, std::vector<std::int64_t> dims) {
        module m;
        auto x = m.add_parameter("x", float_shape({2, 5, 36}));
        auto piece = m.add_instruction(
            make_op("slice", value_map{{"axes", ints({2})}, {"starts", ints({start})}, {"ends", ints({end})}}), {x});
        auto r = m.add_instruction(reshape(std::move(dims)), {piece});
        m.add_return({m.add_instruction(make_op("neg"), {r})});
        return module(m);
    };
    struct config {
        std::int64_t start, end;
        std::vector<std::int64_t> dims;
        bool becomes_view;
    };
    for (const auto& c : std::vector<config>{
             {8, 20, {2, 5, 3, 4}, true},   // start 8 = 2 steps of 4
             {8, 20, {10, 12}, true},       // the dims before the cut merge: still its own group
             {6, 18, {2, 5, 3, 4}, false},  // start 6 is not a whole step of 4
             {8, 20, {2, 60}, false},       // the cut axis merges with the one before
             {8, 20, {2, 5, 12, 1}, true},  // an extent-1 dim after the group
         }) {
        module m = sliced(c.start, c.end, c.dims);
        module out = after_pass<simplify_reshapes>(m);
        bool copies = false;
        for (const auto& ins : out)
            if (ins.name() == "reshape" && !ins.inputs()[0]->get_shape().standard()) copies = true;
        EXPECT_EQ(copies, !c.becomes_view) << c.start << " " << out;
        expect_same_outputs(m, out);
    }
}

TEST(pass_simplify_reshapes, a_copy_stays_where_its_readers_need_it) {
    auto split_piece = [](module& m, instruction_ref x) {
        return m.add_instruction(
            make_op("split", value_map{{"axis", 2}, {"num_outputs", 3}, {"output", 1}, {"sizes", ints({})}}), {x});
    };
    {  // the reshape is an output: the program's results keep their standard strides
        module m;
        auto x = m.add_parameter("x", float_shape({2, 5, 36}));
        m.add_return({m.add_instruction(reshape({2, 5, 3, 4}), {split_piece(m, x)})});
        module out = after_pass<simplify_reshapes>(m);
        EXPECT_EQ(op_names(out), (std::vector<std::string>{"split", "reshape"})) << out;
    }
    {  // a later reshape, a view of the copy, would become a copy itself
        module m;
        auto x = m.add_parameter("x", float_shape({2, 5, 36}));
        auto heads = m.add_instruction(reshape({2, 5, 3, 4}), {split_piece(m, x)});
        auto back = m.add_instruction(reshape({2, 5, 12}), {heads});
        m.add_return({m.add_instruction(make_op("neg"), {back})});
        module out = after_pass<simplify_reshapes>(m);
        EXPECT_EQ(count_ops(out, "split"), 1u) << out;
        expect_same_outputs(m, out);
    }
}

// The keys' path at batch 2: [B, H, S, D] merged to [B * H, S, D], whose
// dims B and H are not neighbours in memory (a view cannot merge them),
// transposed and split back: one transpose of the heads.
TEST(pass_simplify_reshapes, a_transpose_between_a_merge_and_its_split_becomes_one_transpose) {
    program p = keys_path(2, 6);
    const module& m = *p.get_main_module();
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "k = @param:k -> float_type, {2, 5, 3, 4}, {60, 12, 4, 1}\n"
              "q = @param:q -> float_type, {2, 3, 6, 4}, {72, 24, 4, 1}\n"
              "@2 = transpose[permutation={0, 2, 3, 1}](k) -> float_type, {2, 3, 4, 5}, {60, 4, 1, 12}\n"
              "@3 = dot(q,@2) -> float_type, {2, 3, 6, 5}, {90, 30, 5, 1}\n"
              "@4 = @return(@3)\n");
    expect_same_outputs(m, out);
    expect_cpu_matches_ref(p);

    // Split back into other groups (H first), the values differ from one transpose: left alone.
    module other;
    auto k2 = other.add_parameter("k", float_shape({2, 5, 3, 4}));
    auto merged = other.add_instruction(reshape({-1, 5, 4}), {other.add_instruction(transpose({0, 2, 1, 3}), {k2})});
    auto swapped =
        other.add_instruction(reshape({3, 2, 4, 5}), {other.add_instruction(transpose({0, 2, 1}), {merged})});
    other.add_return({other.add_instruction(make_op("neg"), {swapped})});
    module kept = after_pass<simplify_reshapes>(other);
    EXPECT_EQ(count_ops(kept, "reshape"), 2u) << kept;
    expect_same_outputs(other, kept);
}

// GPT-2's attention with a cache returns the keys: a reshape of a QKV piece
// whose transposed view is returned cannot become a view (the return takes
// no new strides), so the rule declines. It used to leave the reshape of the
// whole it had inserted, which merge_reshapes then rewrote every round: the
// pass never reached a fixed point (torch.compile of generate()'s prefill).
TEST(pass_simplify_reshapes, a_declined_view_leaves_nothing_behind) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 7, 64}));
    auto w = m.add_parameter("w", float_shape({64, 192}));
    auto rows = m.add_instruction(reshape({7, 64}), {x});
    auto qkv = m.add_instruction(reshape({1, 7, 192}), {m.add_instruction(make_op("dot"), {rows, w})});
    auto head_view = [&](std::int64_t start) {
        auto piece = m.add_instruction(
            make_op("slice", value_map{{"axes", ints({2})}, {"starts", ints({start})}, {"ends", ints({start + 64})}}),
            {qkv});
        return m.add_instruction(transpose({0, 2, 1, 3}), {m.add_instruction(reshape({1, 7, 4, 16}), {piece})});
    };
    auto queries = head_view(0), keys = head_view(64), values = head_view(128);
    auto scores = m.add_instruction(make_op("dot"), {queries, m.add_instruction(transpose({0, 1, 3, 2}), {keys})});
    auto attended = m.add_instruction(make_op("dot"), {scores, values});
    m.add_return({keys, values, attended});
    module out = after_pass<simplify_reshapes>(m);
    // The queries became a slice of the whole reshaped (a view); the keys and
    // values, whose transposed views are returned, keep their copying reshapes.
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"reshape", "dot", "reshape", "reshape", "slice", "transpose",
                                                       "slice", "reshape", "transpose", "slice", "reshape",
                                                       "transpose", "transpose", "dot", "dot"}))
        << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, a_pointwise_op_of_broadcasts_is_computed_before_them) {
    // where(broadcast(m), 0, lowest): the mask per key, then broadcast over the queries.
    module m;
    auto keys = m.add_parameter("keys", shape{dtype::bool_type, {1, 1, 1, 6}});
    auto x = m.add_parameter("x", float_shape({1, 2, 6, 6}));
    auto spread = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({1, 1, 6, 6})}}), {keys});
    auto mask = m.add_instruction(make_op("where"),
                                  {spread, add_float_literal(m, {1}, {0.0f}), add_float_literal(m, {1}, {-3.4e38f})});
    m.add_return({m.add_instruction(make_op("add"), {x, mask})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"where", "broadcast", "add"})) << out;
    EXPECT_NE(to_string(out).find("where(keys,"), std::string::npos) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, a_pointwise_op_with_a_full_size_input_stays_after_the_broadcast) {
    module m;
    auto bias = m.add_parameter("bias", float_shape({3}));
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto spread = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}), {bias});
    m.add_return({m.add_instruction(make_op("relu"), {m.add_instruction(make_op("add"), {x, spread})})});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"broadcast", "add", "relu"})) << out;
    expect_same_outputs(m, out);
}

namespace {

// gather_nd(data [2, 3], indices [1, 6, 2]) with the indices given.
module gather_every_element(const std::vector<std::int64_t>& indices) {
    module m;
    auto data = m.add_parameter("data", float_shape({2, 3}));
    auto where = m.add_literal(literal(shape{dtype::int64_type, {1, 6, 2}}, indices));
    m.add_return({m.add_instruction(make_op("relu"), {m.add_instruction(make_op("gather_nd"), {data, where})})});
    return module(m);
}

}  // namespace

TEST(pass_simplify_reshapes, a_gather_nd_of_every_element_in_order_is_a_reshape) {
    module m = gather_every_element({0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"reshape", "relu"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_reshapes, a_gather_nd_out_of_order_stays) {
    module m = gather_every_element({0, 0, 0, 1, 0, 2, 1, 0, 1, 2, 1, 1});
    module out = after_pass<simplify_reshapes>(m);
    EXPECT_EQ(count_ops(out, "gather_nd"), 1u) << out;
    expect_same_outputs(m, out);
}
