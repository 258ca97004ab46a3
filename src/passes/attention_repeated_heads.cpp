// Grouped-query attention (Llama's repeat_kv; ONNX exports write the same)
// repeats each of kv key/value heads rep times before attention,
//
//   reshape(broadcast(x [.., kv, 1, L, d] to [.., kv, rep, L, d]) to [.., kv * rep, L, d])
//
// and the reshape of a broadcast is a copy: the whole key/value cache, twice
// a layer, on every decode step. Split the query heads the same way instead,
// q [.., kv * rep, Sq, d] -> [.., kv, rep, Sq, d] (a view of a standard q),
// and attention's batch broadcast reads x's one copy of each head for its
// rep query heads:
//
//   fused_attention(q', transpose(x_k), x_v [, mask']) -> [.., kv, rep, Sq, Dv]
//
// merged back to [.., kv * rep, Sq, Dv] by views. An output_order carries
// over, the heads' dim becoming the two, so the result keeps its strides.
#include "passes/attention_repeated_heads.hpp"

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/fused_attention.hpp"
#include "ops/shape_ops.hpp"

namespace kiln {

namespace {

std::vector<std::int64_t> as_dims(const std::vector<std::size_t>& lens) {
    return {lens.begin(), lens.end()};
}

// lens with dim h split into (outer, lens[h] / outer).
std::vector<std::size_t> split_dim(std::vector<std::size_t> lens, std::size_t h, std::size_t outer) {
    const std::size_t inner = lens[h] / outer;
    lens[h] = inner;
    lens.insert(lens.begin() + static_cast<std::ptrdiff_t>(h), outer);
    return lens;
}

// x when `repeated` [P.., kv * rep, L, d] is reshape(broadcast(x)) with x
// [P.., kv, 1, L, d] broadcast to [P.., kv, rep, L, d] (rep > 1).
std::optional<instruction_ref> unrepeated_heads(instruction_ref repeated) {
    if (repeated->name() != "reshape") return std::nullopt;
    const instruction_ref wide = repeated->inputs()[0];
    if (wide->name() != "broadcast") return std::nullopt;
    const instruction_ref x = wide->inputs()[0];
    const auto& merged = repeated->get_shape().lens();
    const auto& lens = x->get_shape().lens();
    const std::size_t rank = merged.size();
    if (rank < 3 || lens.size() != rank + 1 || lens[rank - 2] != 1) return std::nullopt;
    const std::size_t h = rank - 3;  // the heads' dim
    if (lens[h] == 0 || merged[h] % lens[h] != 0 || merged[h] == lens[h] ||
        wide->get_shape().lens() != split_dim(merged, h, lens[h]))
        return std::nullopt;
    return x;
}

// A transpose that swaps the last two dims only.
bool swaps_last_two(instruction_ref ins) {
    const auto* t = ins->get_operator().get_if<op::transpose>();
    const std::size_t rank = ins->get_shape().ndim();
    if (t == nullptr || t->permutation.size() != rank || rank < 2) return false;
    for (std::size_t d = 0; d + 2 < rank; ++d)
        if (t->permutation[d] != static_cast<std::int64_t>(d)) return false;
    return t->permutation[rank - 2] == static_cast<std::int64_t>(rank - 1) &&
           t->permutation[rank - 1] == static_cast<std::int64_t>(rank - 2);
}

// An order over the result's dims with dim h split in two.
std::vector<std::int64_t> split_order(const std::vector<std::int64_t>& order, std::int64_t h) {
    std::vector<std::int64_t> split;
    for (auto d : order) {
        split.push_back(d > h ? d + 1 : d);
        if (d == h) split.push_back(h + 1);
    }
    return split;
}

// The mask of scores [.., heads, Sq, Sk] for scores [.., kv, heads / kv,
// Sq, Sk]: unchanged when it has no heads' dim, with a 1 inserted when it
// broadcasts over the heads, split when it has one per head; else nullopt.
std::optional<instruction_ref> split_mask(module& m, instruction_ref pos, instruction_ref mask, std::size_t heads,
                                          std::size_t kv) {
    const auto& lens = mask->get_shape().lens();
    if (lens.size() < 3) return mask;
    const std::size_t h = lens.size() - 3;
    if (lens[h] == 1) {
        op::unsqueeze one;
        one.axes = {static_cast<std::int64_t>(h)};
        return m.insert_instruction(pos, one, {mask});
    }
    if (lens[h] != heads) return std::nullopt;
    op::reshape split;
    split.dims = as_dims(split_dim(lens, h, kv));
    return m.insert_instruction(pos, split, {mask});
}

bool apply_rule(module& m, const match::match_result& r) {
    const instruction_ref attention = r.root;
    const auto& a = *attention->get_operator().get_if<op::fused_attention>();
    const auto& in = attention->inputs();
    const std::size_t rank = attention->get_shape().ndim();
    for (std::size_t i = 0; i < 3; ++i)
        if (in[i]->get_shape().ndim() != rank) return false;
    if (rank < 3 || !swaps_last_two(in[1])) return false;
    const auto keys = unrepeated_heads(in[1]->inputs()[0]);
    const auto values = unrepeated_heads(in[2]);
    if (!keys || !values) return false;
    const std::size_t h = rank - 3;
    const std::size_t heads = in[0]->get_shape().lens()[h];
    const std::size_t kv = (*keys)->get_shape().lens()[h];
    if (in[1]->get_shape().lens()[h] != heads || in[2]->get_shape().lens()[h] != heads ||
        (*values)->get_shape().lens()[h] != kv)
        return false;
    std::vector<instruction_ref> inputs;
    op::reshape split_q;
    split_q.dims = as_dims(split_dim(in[0]->get_shape().lens(), h, kv));
    inputs.push_back(m.insert_instruction(attention, split_q, {in[0]}));
    op::transpose kt;
    for (std::size_t d = 0; d <= rank; ++d) kt.permutation.push_back(static_cast<std::int64_t>(d));
    std::swap(kt.permutation[rank - 1], kt.permutation[rank]);
    inputs.push_back(m.insert_instruction(attention, kt, {*keys}));
    inputs.push_back(*values);
    if (a.has_mask) {
        const auto mask = split_mask(m, attention, in[3], heads, kv);
        if (!mask) return false;
        inputs.push_back(*mask);
    }
    op::fused_attention grouped = a;
    grouped.output_order = split_order(a.output_order, static_cast<std::int64_t>(h));
    const instruction_ref result = m.insert_instruction(attention, grouped, inputs);

    if (a.output_order.empty()) {
        op::reshape merge;
        merge.dims = as_dims(attention->get_shape().lens());
        return replace_value(m, attention, m.insert_instruction(attention, merge, {result}));
    }
    // In memory order the split result is standard: merge the two dims
    // there, then give the dims their places back. Both are views.
    op::transpose in_memory_order;
    in_memory_order.permutation = grouped.output_order;
    op::reshape merge;
    op::transpose back;
    back.permutation.resize(rank);
    for (std::size_t i = 0; i < rank; ++i) {
        const auto d = static_cast<std::size_t>(a.output_order[i]);
        merge.dims.push_back(static_cast<std::int64_t>(attention->get_shape().lens()[d]));
        back.permutation[d] = static_cast<std::int64_t>(i);
    }
    const instruction_ref merged =
        m.insert_instruction(attention, merge, {m.insert_instruction(attention, in_memory_order, {result})});
    return replace_value(m, attention, m.insert_instruction(attention, back, {merged}));
}

}  // namespace

rewrite_rule repeated_heads_rule() {
    return {"attention_repeated_heads", match::name("fused_attention"), apply_rule};
}

}  // namespace kiln
