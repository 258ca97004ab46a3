// Reshape / transpose / broadcast simplification, as rewrite rules:
//  - a view or copy whose result is exactly its input (same lens and
//    strides) is removed: reshape to the same lens, transpose by the
//    identity, squeeze or unsqueeze of nothing, broadcast to the same lens,
//    contiguous of a standard value, a slice of everything;
//  - transpose(transpose(x)) becomes one transpose, or x when the two cancel;
//  - chains of reshape / flatten / squeeze / unsqueeze on a standard value
//    become one reshape (on a strided value they stay: one of them copies,
//    and merging could turn a free view into a copy);
//  - broadcast(broadcast(x)) becomes one broadcast;
//  - a pointwise op whose inputs are all broadcasts (or smaller than its
//    result) is computed at the shape they broadcast from, then broadcast:
//    convert(broadcast(x)) becomes broadcast(convert(x)), so that each
//    distinct value is converted once and a 16-bit program's bias (a
//    broadcast 16-bit constant converted to float32) stays a broadcast
//    constant that products take as their bias; where(broadcast(m), 0, -max)
//    computes an attention mask per key, not per (query, key);
//  - a reshape of a strided value that would copy becomes views where the
//    strides allow: one that only adds or removes dims of extent 1 becomes
//    squeeze / unsqueeze, and one of a slice or split piece of a standard
//    value becomes a slice of that value reshaped (a fused QKV product's
//    [B, S, 3 * H * D] cut into three [B, S, H, D]), and a transpose
//    between a reshape that merges dims and one that splits them back
//    becomes one transpose. The readers then read the strided view
//    (replace_value_restrided);
//  - a gather along axis 0 whose constant indices are 0, 1, ..., N - 1 in
//    order (N the axis's length) reads every row once, in order: a reshape
//    of its input to the indices' lens followed by the rows' (Hugging Face's
//    attention masks index the flattened mask with batch * S + position,
//    which is then no constant that depends on the batch); likewise a
//    gather_nd whose constant indices address every element of its input
//    in order (transformers' padding mask, read at [batch, position] for
//    every position).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "ops/index.hpp"
#include "ops/index_scatter.hpp"
#include "ops/op_helpers.hpp"
#include "ops/shape_ops.hpp"
#include "passes/constant_value.hpp"
#include "passes/pointwise_before_broadcasts.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

using match::any;
using match::any_of_names;
using match::match_result;
using match::name;
using match::standard_shape;

const std::vector<std::string> reshape_like = {"reshape", "flatten", "squeeze", "unsqueeze"};

std::vector<std::int64_t> int_list(const value& v) {
    std::vector<std::int64_t> out;
    for (const auto& e : v.as_list()) out.push_back(e.as_int());
    return out;
}

// The permutation a transpose applies to an input of `rank` dims (empty means reversed).
std::vector<std::int64_t> resolved_permutation(const instruction& t) {
    auto perm = int_list(*t.get_operator().attributes().find("permutation"));
    if (perm.empty()) {
        perm.resize(t.get_shape().ndim());
        std::iota(perm.rbegin(), perm.rend(), std::int64_t{0});
    }
    return perm;
}

bool slice_steps_are_one(const instruction& ins) {
    if (ins.name() != "slice") return true;
    for (auto s : int_list(*ins.get_operator().attributes().find("steps")))
        if (s != 1) return false;
    return true;
}

value axes_value(const std::vector<std::int64_t>& axes) {
    return value_list(axes.begin(), axes.end());
}

rewrite_rule remove_noop_views() {
    auto pattern =
        any_of_names({"reshape", "flatten", "squeeze", "unsqueeze", "transpose", "broadcast", "contiguous", "slice"})
            .args(any().bind("x"))
            .where([](instruction_ref ins) {
                return ins->get_shape() == ins->inputs()[0]->get_shape() && slice_steps_are_one(*ins);
            });
    return {"remove_noop_view", pattern,
            [](module& m, const match_result& r) { return replace_value(m, r.root, r.at("x")); }};
}

rewrite_rule merge_transposes() {
    auto pattern = name("transpose").args(name("transpose").args(any().bind("x")).bind("inner"));
    return {"merge_transposes", pattern, [](module& m, const match_result& r) {
                auto inner = resolved_permutation(*r.at("inner"));
                auto outer = resolved_permutation(*r.root);
                // Output dim i of the pair is dim outer[i] of the inner result,
                // which is dim inner[outer[i]] of x.
                std::vector<std::int64_t> combined;
                bool identity = true;
                for (std::size_t i = 0; i < outer.size(); ++i) {
                    combined.push_back(inner.at(static_cast<std::size_t>(outer[i])));
                    identity = identity && combined.back() == static_cast<std::int64_t>(i);
                }
                if (identity) return replace_value(m, r.root, r.at("x"));
                return replace_with_new(
                    m, r.root,
                    make_op("transpose", value_map{{"permutation", value_list(combined.begin(), combined.end())}}),
                    {r.at("x")});
            }};
}

rewrite_rule merge_reshapes() {
    auto pattern = any_of_names(reshape_like).args(any_of_names(reshape_like).args(standard_shape().bind("x")));
    return {"merge_reshapes", pattern, [](module& m, const match_result& r) {
                const shape& out = r.root->get_shape();
                // A 0 in reshape's dims means "copy the input's extent", so
                // empty tensors keep their chain.
                if (out.elements() == 0) return false;
                return replace_with_new(m, r.root, make_op("reshape", value_map{{"dims", lens_value(out.lens())}}),
                                        {r.at("x")});
            }};
}

rewrite_rule merge_broadcasts() {
    auto pattern = name("broadcast").args(name("broadcast").args(any().bind("x")));
    return {"merge_broadcasts", pattern, [](module& m, const match_result& r) {
                const shape& out = r.root->get_shape();
                auto merged = make_op("broadcast", value_map{{"out_lens", lens_value(out.lens())}});
                auto merged_ins = insert_if_shape(m, r.root, merged, {r.at("x")}, out);
                return merged_ins != m.end() && replace_value(m, r.root, merged_ins);
            }};
}

// A reshape that copies: its input is strided.
match::matcher copying_reshape() {
    return any_of_names({"reshape", "flatten"}).where([](instruction_ref ins) {
        return !ins->inputs()[0]->get_shape().standard() && ins->get_shape().elements() > 0;
    });
}

// A reshape that copies, or whose input has a dim of 1: a slice of a dim
// after it is then standard (the batch's stride no longer counts) where at
// longer lengths it is strided, and reads as the same view at both.
match::matcher reshape_of_strided_or_unit_dims() {
    return any_of_names({"reshape", "flatten"}).where([](instruction_ref ins) {
        const shape& in = ins->inputs()[0]->get_shape();
        const auto& lens = in.lens();
        return (!in.standard() || std::find(lens.begin(), lens.end(), std::size_t{1}) != lens.end()) &&
               ins->get_shape().elements() > 0;
    });
}

// A reshape that only removes and adds dims of extent 1 (which never move
// an address) is squeeze / unsqueeze of any strides.
rewrite_rule unit_dim_reshapes_as_views() {
    auto pattern = copying_reshape().args(any().bind("x"));
    return {"unit_dim_reshape_as_view", pattern, [](module& m, const match_result& r) {
                const instruction_ref x = r.at("x");
                const auto& in = x->get_shape().lens();
                const auto& out = r.root->get_shape().lens();
                std::vector<std::size_t> in_kept, out_kept;
                std::vector<std::int64_t> removed, added;
                for (std::size_t d = 0; d < in.size(); ++d) {
                    if (in[d] == 1)
                        removed.push_back(static_cast<std::int64_t>(d));
                    else
                        in_kept.push_back(in[d]);
                }
                for (std::size_t d = 0; d < out.size(); ++d) {
                    if (out[d] == 1)
                        added.push_back(static_cast<std::int64_t>(d));
                    else
                        out_kept.push_back(out[d]);
                }
                if (in_kept != out_kept) return false;
                instruction_ref view = x;
                if (in != out) {
                    if (!removed.empty())
                        view = m.insert_instruction(
                            r.root, make_op("squeeze", value_map{{"axes", axes_value(removed)}}), {view});
                    if (!added.empty())
                        view = m.insert_instruction(
                            r.root, make_op("unsqueeze", value_map{{"axes", axes_value(added)}}), {view});
                }
                return replace_value_restrided(m, r.root, view);
            }};
}

// Where a slice or split piece lies in its input: the one axis it cuts
// (with unit steps: every stride as the input's) and the first index there.
struct cut {
    std::size_t axis = 0;
    std::size_t start = 0;
};

std::optional<cut> cut_of(const instruction& piece, const shape& input) {
    const shape& s = piece.get_shape();
    if (s.ndim() != input.ndim()) return std::nullopt;
    // (A dim of 1 moves no address: its stride may be anything.)
    for (std::size_t d = 0; d < s.ndim(); ++d)
        if (s.lens()[d] > 1 && s.strides()[d] != input.strides()[d]) return std::nullopt;
    std::optional<std::size_t> axis;
    for (std::size_t d = 0; d < s.ndim(); ++d) {
        if (s.lens()[d] == input.lens()[d]) continue;
        if (axis) return std::nullopt;
        axis = d;
    }
    if (!axis) return std::nullopt;
    std::size_t offset = 0;
    if (const auto* sl = piece.get_operator().get_if<op::slice>())
        offset = sl->layout(input).offset;
    else if (const auto* sp = piece.get_operator().get_if<op::split>())
        offset = sp->layout(input).offset;
    else
        return std::nullopt;
    const std::size_t stride = input.strides()[*axis];
    if (offset % stride != 0) return std::nullopt;
    return cut{*axis, offset / stride};
}

// reshape(piece of x) = slice(reshape'(x)) when the reshape leaves the cut
// axis in dims of its own, [j0, j1) of the result, and the dims after j0
// (whose product q counts the elements of one step along j0) divide the
// full axis and the start: reshape' has the full axis / q at j0.
rewrite_rule reshapes_of_pieces_as_views() {
    auto pattern = reshape_of_strided_or_unit_dims().args(
        any_of_names({"slice", "split"}).args(standard_shape().bind("x")).bind("piece"));
    return {
        "reshape_of_piece_as_view", pattern, [](module& m, const match_result& r) {
            const instruction_ref x = r.at("x");
            const shape& full = x->get_shape();
            const auto c = cut_of(*r.at("piece"), full);
            if (!c) return false;
            const auto& piece = r.at("piece")->get_shape().lens();
            auto out = r.root->get_shape().lens();
            std::size_t before = 1;
            for (std::size_t d = 0; d < c->axis; ++d) before *= piece[d];
            const std::size_t through = before * piece[c->axis];
            std::vector<std::size_t> prefix{1};
            for (auto l : out) prefix.push_back(prefix.back() * l);
            std::size_t j1 = 0;
            while (j1 < prefix.size() && prefix[j1] != through) ++j1;
            if (j1 == prefix.size()) return false;
            // The last dim that starts the cut axis's group (past any extent-1 dims before it).
            std::size_t j0 = j1;
            while (j0 > 0 && prefix[j0 - 1] != before) --j0;
            if (j0 == 0) return false;
            --j0;
            const std::size_t q = prefix[j1] / prefix[j0 + 1];
            const std::size_t extent = full.lens()[c->axis];
            if (extent % q != 0 || c->start % q != 0) return false;
            const std::size_t first = c->start / q, count = out[j0];
            out[j0] = extent / q;
            auto whole = m.insert_instruction(r.root, make_op("reshape", value_map{{"dims", lens_value(out)}}), {x});
            auto sliced = m.insert_instruction(
                r.root,
                make_op("slice", value_map{{"axes", axes_value({static_cast<std::int64_t>(j0)})},
                                           {"starts", axes_value({static_cast<std::int64_t>(first)})},
                                           {"ends", axes_value({static_cast<std::int64_t>(first + count)})}}),
                {whole});
            return replace_value_restrided(m, r.root, sliced);
        }};
}

// For a reshape that only merges neighbouring dims (no extent 1 anywhere):
// the dims of `from` that make each dim of `to`, as [begin, end).
std::optional<std::vector<std::pair<std::size_t, std::size_t>>> merged_groups(const std::vector<std::size_t>& from,
                                                                              const std::vector<std::size_t>& to) {
    std::vector<std::pair<std::size_t, std::size_t>> groups;
    std::size_t d = 0;
    for (auto len : to) {
        const std::size_t begin = d;
        std::size_t product = 1;
        while (d < from.size() && product < len) product *= from[d++];
        if (product != len || d == begin) return std::nullopt;
        groups.emplace_back(begin, d);
    }
    if (d != from.size()) return std::nullopt;
    return groups;
}

// The dims of `lens` longer than 1, in order: the ones a reshape can merge
// or split (a dim of 1 never moves an address).
std::vector<std::size_t> long_dims(const std::vector<std::size_t>& lens) {
    std::vector<std::size_t> dims;
    for (std::size_t d = 0; d < lens.size(); ++d)
        if (lens[d] > 1) dims.push_back(d);
    return dims;
}

std::vector<std::size_t> dims_of_one(const std::vector<std::size_t>& lens) {
    std::vector<std::size_t> dims;
    for (std::size_t d = 0; d < lens.size(); ++d)
        if (lens[d] == 1) dims.push_back(d);
    return dims;
}

std::vector<std::size_t> lens_at(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& dims) {
    std::vector<std::size_t> out;
    for (auto d : dims) out.push_back(lens[d]);
    return out;
}

// reshape(transpose(reshape(y))) where the first reshape merges groups of
// y's dims, the transpose moves the merged dims and the last reshape splits
// each back into its group: one transpose of y. The keys' path of
// transformers' exports: [B, H, S, D] merged to [B * H, S, D], transposed
// to [B * H, D, S], split to [B, H, D, S]. Dims of 1 are left out of the
// groups and keep their order, so that a batch or a sequence of 1 (where
// the reshapes are squeeze / unsqueeze, or merge a 1) gives the same
// transpose as longer ones: a program optimised at both ends of a range
// is then one graph (ir/extent_independence.hpp).
rewrite_rule transposes_between_merge_and_split_as_views() {
    auto pattern = any_of_names(reshape_like)
                       .args(name("transpose")
                                 .args(any_of_names(reshape_like).args(any().bind("y")).bind("merge"))
                                 .bind("transpose"));
    return {
        "transpose_of_merged_dims_as_view", pattern, [](module& m, const match_result& r) {
            const instruction_ref y = r.at("y"), merge = r.at("merge"), t = r.at("transpose");
            if (r.root->get_shape().elements() == 0) return false;
            const auto& y_lens = y->get_shape().lens();
            const auto& merge_lens = merge->get_shape().lens();
            const auto& t_lens = t->get_shape().lens();
            const auto& out_lens = r.root->get_shape().lens();
            const auto y_long = long_dims(y_lens), merge_long = long_dims(merge_lens);
            const auto t_long = long_dims(t_lens), out_long = long_dims(out_lens);
            const auto merged = merged_groups(lens_at(y_lens, y_long), lens_at(merge_lens, merge_long));
            const auto split = merged_groups(lens_at(out_lens, out_long), lens_at(t_lens, t_long));
            const auto y_ones = dims_of_one(y_lens), out_ones = dims_of_one(out_lens);
            if (!merged || !split || y_ones.size() != out_ones.size()) return false;
            // Output dim d is dim `from[d]` of y.
            std::vector<std::int64_t> from(out_lens.size(), -1);
            const auto perm = resolved_permutation(*t);
            for (std::size_t k = 0; k < t_long.size(); ++k) {
                const auto merged_dim = static_cast<std::size_t>(perm[t_long[k]]);
                const auto at = std::find(merge_long.begin(), merge_long.end(), merged_dim);
                if (at == merge_long.end()) return false;
                const auto [begin, end] = (*merged)[static_cast<std::size_t>(at - merge_long.begin())];
                const auto [out_begin, out_end] = (*split)[k];
                if (end - begin != out_end - out_begin) return false;
                for (std::size_t i = 0; i < end - begin; ++i) {
                    const std::size_t yd = y_long[begin + i], od = out_long[out_begin + i];
                    if (y_lens[yd] != out_lens[od]) return false;
                    from[od] = static_cast<std::int64_t>(yd);
                }
            }
            for (std::size_t i = 0; i < out_ones.size(); ++i) from[out_ones[i]] = static_cast<std::int64_t>(y_ones[i]);
            auto view =
                m.insert_instruction(r.root, make_op("transpose", value_map{{"permutation", axes_value(from)}}), {y});
            return replace_value_restrided(m, r.root, view);
        }};
}

// Whether `indices` (an integer constant) holds 0, 1, ..., n - 1 in order.
bool counts_up_to(const instruction& indices, std::size_t n) {
    const shape& s = indices.get_shape();
    if (s.elements() != n || (s.type() != dtype::int64_type && s.type() != dtype::int32_type)) return false;
    const auto values = constant_value(indices);
    if (!values || !values->get_shape().standard()) return false;
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t v =
            s.type() == dtype::int64_type ? values->data_as<std::int64_t>()[i] : values->data_as<std::int32_t>()[i];
        if (v != static_cast<std::int64_t>(i)) return false;
    }
    return true;
}

rewrite_rule gathers_of_every_row_in_order_as_reshapes() {
    auto pattern = name("gather").args(standard_shape().bind("x"), any().bind("indices"));
    return {"gathers_of_every_row_in_order_as_reshapes", pattern, [](module& m, const match_result& r) {
                const auto* g = r.root->get_operator().get_if<op::gather>();
                const shape& x = r.at("x")->get_shape();
                if (g == nullptr || g->axis != 0 || x.ndim() == 0 || x.lens()[0] == 0) return false;
                if (!counts_up_to(*r.at("indices"), x.lens()[0])) return false;
                const shape& out = r.root->get_shape();
                return replace_with_new(m, r.root, make_op("reshape", value_map{{"dims", lens_value(out.lens())}}),
                                        {r.at("x")});
            }};
}

// Whether `indices` (an integer constant [..., n]) holds the index of every
// element of a standard `data` of rank n, in row-major order.
bool addresses_every_element_in_order(const instruction& indices, const shape& data) {
    const shape& s = indices.get_shape();
    const std::size_t rank = data.ndim();
    if (rank == 0 || s.ndim() == 0 || s.lens().back() != rank || s.elements() != data.elements() * rank ||
        (s.type() != dtype::int64_type && s.type() != dtype::int32_type))
        return false;
    const auto values = constant_value(indices);
    if (!values || !values->get_shape().standard()) return false;
    std::vector<std::size_t> position(rank, 0);
    for (std::size_t e = 0; e < data.elements(); ++e) {
        for (std::size_t d = 0; d < rank; ++d) {
            const std::size_t at = e * rank + d;
            const std::int64_t v = s.type() == dtype::int64_type ? values->data_as<std::int64_t>()[at]
                                                                 : values->data_as<std::int32_t>()[at];
            if (v != static_cast<std::int64_t>(position[d])) return false;
        }
        for (std::size_t d = rank; d-- > 0;) {
            if (++position[d] < data.lens()[d]) break;
            position[d] = 0;
        }
    }
    return true;
}

rewrite_rule gather_nd_of_every_element_in_order_as_reshape() {
    auto pattern = name("gather_nd").args(standard_shape().bind("x"), match::is_constant().bind("indices"));
    return {"gather_nd_of_every_element_in_order_as_reshape", pattern, [](module& m, const match_result& r) {
                const auto* g = r.root->get_operator().get_if<op::gather_nd>();
                const shape& x = r.at("x")->get_shape();
                if (g == nullptr || g->batch_dims != 0 || x.elements() == 0) return false;
                if (!addresses_every_element_in_order(*r.at("indices"), x)) return false;
                const shape& out = r.root->get_shape();
                return replace_with_new(m, r.root, make_op("reshape", value_map{{"dims", lens_value(out.lens())}}),
                                        {r.at("x")});
            }};
}

}  // namespace

void simplify_reshapes::apply(module& m) const {
    rewrite_to_fixed_point(
        m,
        {remove_noop_views(), merge_transposes(), merge_reshapes(), merge_broadcasts(), pointwise_before_broadcasts(),
         unit_dim_reshapes_as_views(), reshapes_of_pieces_as_views(), transposes_between_merge_and_split_as_views(),
         gathers_of_every_row_in_order_as_reshapes(), gather_nd_of_every_element_in_order_as_reshape()});
}

}  // namespace kiln
