// Reshape / transpose / broadcast simplification, as rewrite rules:
//  - a view or copy whose result is exactly its input (same lens and
//    strides) is removed: reshape to the same lens, transpose by the
//    identity, squeeze or unsqueeze of nothing, broadcast to the same lens,
//    contiguous of a standard value, a slice of everything;
//  - transpose(transpose(x)) becomes one transpose, or x when the two cancel;
//  - chains of reshape / flatten / squeeze / unsqueeze on a standard value
//    become one reshape (on a strided value they stay: one of them copies,
//    and merging could turn a free view into a copy);
//  - broadcast(broadcast(x)) becomes one broadcast.
#include <cstdint>
#include <numeric>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

using match::any;
using match::any_of_names;
using match::match_result;
using match::name;

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
    auto pattern = any_of_names(reshape_like).args(any_of_names(reshape_like).args(match::standard_shape().bind("x")));
    return {"merge_reshapes", pattern, [](module& m, const match_result& r) {
                const shape& out = r.root->get_shape();
                // A 0 in reshape's dims means "copy the input's extent", so
                // empty tensors keep their chain.
                if (out.elements() == 0) return false;
                value_list dims;
                for (auto l : out.lens()) dims.emplace_back(static_cast<std::int64_t>(l));
                return replace_with_new(m, r.root, make_op("reshape", value_map{{"dims", dims}}), {r.at("x")});
            }};
}

rewrite_rule merge_broadcasts() {
    auto pattern = name("broadcast").args(name("broadcast").args(any().bind("x")));
    return {"merge_broadcasts", pattern, [](module& m, const match_result& r) {
                const shape& out = r.root->get_shape();
                value_list lens;
                for (auto l : out.lens()) lens.emplace_back(static_cast<std::int64_t>(l));
                auto merged = make_op("broadcast", value_map{{"out_lens", lens}});
                auto merged_ins = insert_if_shape(m, r.root, merged, {r.at("x")}, out);
                return merged_ins != m.end() && replace_value(m, r.root, merged_ins);
            }};
}

}  // namespace

void simplify_reshapes::apply(module& m) const {
    rewrite_to_fixed_point(m, {remove_noop_views(), merge_transposes(), merge_reshapes(), merge_broadcasts()});
}

}  // namespace kiln
