// Decoder exports compute their causal mask from positions (GPT-2's ONNX
// export: Range, comparisons, And, then Where(mask, 0, lowest)), and at a
// fixed sequence length it is a constant [.., S, S]. As a constant it is
// planned for one length, so a program that follows the sequence at run
// time cannot keep it, and whether constant propagation stores it depends
// on the length (a [2, 2] mask is small enough, [1024, 1024] is not), so
// programs optimised at two lengths differ. The causal flag says the same
// at every length, reads no mask, and lets the kernel skip the masked keys.
//
// Masked out means -inf, or a value at or below masked_out (exporters write
// float32's lowest, -3.4e38): added to any score of sane magnitude, its
// probability is exactly 0 either way. Masks of -1e4 or -1e9 stay masks,
// and so does anything with a mask over the batch or heads that is not the
// same causal matrix in each.
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/passes.hpp"
#include "ops/fused_attention.hpp"
#include "passes/constant_value.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

constexpr double masked_out = -1e30;

// Masks of sequences up to 4096 are read; longer ones stay.
constexpr std::size_t largest_mask_read = std::size_t{1} << 24;

// `lens` with every dim before the last two set to 1.
std::vector<std::size_t> one_matrix(std::vector<std::size_t> lens) {
    for (std::size_t d = 0; d + 2 < lens.size(); ++d) lens[d] = 1;
    return lens;
}

// The first matrix of `value` (its last two dims) where every matrix it
// holds is the same (a literal folded whole, positions repeated over the
// batch), as a view; nothing where they differ.
std::optional<argument> first_of_equal_matrices(const argument& value) {
    const shape& s = value.get_shape();
    const shape first(s.type(), one_matrix(s.lens()));
    if (first.elements() == s.elements()) return value;
    if (!s.standard() || value.data() == nullptr) return std::nullopt;
    const std::size_t bytes = first.bytes();
    for (std::size_t offset = bytes; offset < s.bytes(); offset += bytes)
        if (std::memcmp(value.data(), value.data() + offset, bytes) != 0) return std::nullopt;
    return value.reshaped(first);
}

// The first matrix of a constant mask computed by pointwise ops from
// literals whose matrices are all the same (exports expand the mask over the batch:
// [64, 1, 2048, 2048] is a gigabyte, its matrix 16 MB), which is then every
// matrix's value; nothing where the mask is computed otherwise.
std::optional<argument> one_matrix_of(const instruction& mask) {
    std::vector<const instruction*> order;
    std::unordered_set<const instruction*> seen{&mask};
    std::vector<std::pair<const instruction*, bool>> stack{{&mask, false}};
    std::unordered_map<const instruction*, const instruction*> aliases;  // a broadcast -> its input
    while (!stack.empty()) {
        auto [cur, expanded] = stack.back();
        stack.pop_back();
        if (cur->is_literal()) {
            if (!first_of_equal_matrices(cur->get_literal().get_argument())) return std::nullopt;
            order.push_back(cur);
            continue;
        }
        if (expanded) {
            order.push_back(cur);
            continue;
        }
        if (cur->name() == "broadcast" && cur->inputs().size() == 1 &&
            cur->inputs()[0]->get_shape().ndim() == cur->get_shape().ndim()) {
            // Of the same rank, it spreads dims of 1 as numpy's broadcasting
            // in its pointwise readers would: they read its input instead.
            aliases.emplace(cur, &*cur->inputs()[0]);
            if (seen.insert(&*cur->inputs()[0]).second) stack.emplace_back(&*cur->inputs()[0], false);
            continue;
        }
        if (!cur->get_operator().is_pointwise() || cur->inputs().empty()) return std::nullopt;
        const shape& s = cur->get_shape();
        if (shape(s.type(), one_matrix(s.lens())).elements() > largest_mask_read) return std::nullopt;
        stack.emplace_back(cur, true);
        for (const auto& in : cur->inputs())
            if (seen.insert(&*in).second) stack.emplace_back(&*in, false);
    }
    if (aliases.count(&mask)) return std::nullopt;
    std::unordered_map<const instruction*, argument> values;
    try {
        for (const instruction* cur : order) {
            if (cur->is_literal()) {
                values.emplace(cur, *first_of_equal_matrices(cur->get_literal().get_argument()));
                continue;
            }
            std::vector<argument> args;
            for (const auto& in : cur->inputs()) {
                auto alias = aliases.find(&*in);
                args.push_back(values.at(alias == aliases.end() ? &*in : alias->second));
            }
            const shape& s = cur->get_shape();
            values.emplace(cur, cur->get_operator().evaluate(shape(s.type(), one_matrix(s.lens())), args));
        }
    } catch (const error&) {
        return std::nullopt;
    }
    return values.at(&mask);
}

// Whether `value` holds `matrices` matrices [sq, sk] (standard order) that
// add 0 at (i, j <= i + sk - sq) and mask out the rest.
bool holds_causal_matrices(const argument& value, std::size_t matrices, std::size_t sq, std::size_t sk) {
    auto holds = [&](const auto* v) {
        for (std::size_t b = 0; b < matrices; ++b, v += sq * sk) {
            for (std::size_t i = 0; i < sq; ++i) {
                const auto* row = v + i * sk;
                const std::size_t seen = i + sk - sq + 1;
                for (std::size_t j = 0; j < seen; ++j)
                    if (row[j] != 0) return false;
                for (std::size_t j = seen; j < sk; ++j)
                    if (!(row[j] <= masked_out)) return false;
            }
        }
        return true;
    };
    const shape& s = value.get_shape();
    if (s.standard() && s.type() == dtype::float_type) return holds(value.data_as<const float>());
    const std::vector<double> values = value.to_vector<double>();
    return holds(values.data());
}

// Whether `mask`, broadcast to scores [.., sq, sk], adds 0 at (i, j <= i +
// sk - sq) and masks out the rest, in every matrix it holds.
bool is_causal_mask(const instruction& mask, std::size_t sq, std::size_t sk) {
    const shape& s = mask.get_shape();
    const auto& lens = s.lens();
    if (!is_floating(s.type()) || lens.size() < 2 || lens[lens.size() - 2] != sq || lens.back() != sk) return false;
    if (auto matrix = one_matrix_of(mask)) return holds_causal_matrices(*matrix, 1, sq, sk);
    const auto value = constant_value(mask, largest_mask_read);
    return value && holds_causal_matrices(*value, s.elements() / (sq * sk), sq, sk);
}

// The masks read so far and whether they are causal (twelve layers read one).
using verdicts = std::map<std::tuple<const instruction*, std::size_t, std::size_t>, bool>;

bool apply_rule(module& m, const match::match_result& r, verdicts& known) {
    const instruction_ref attention = r.root;
    const auto& a = *attention->get_operator().get_if<op::fused_attention>();
    if (!a.has_mask || a.causal) return false;
    const auto& in = attention->inputs();
    const shape scores = a.scores_shape(attention->input_shapes());
    const auto& lens = scores.lens();
    const std::size_t sq = lens[lens.size() - 2], sk = lens.back();
    if (sq == 0 || sk < sq) return false;
    const auto key = std::make_tuple(&*in[3], sq, sk);
    auto found = known.find(key);
    if (found == known.end()) found = known.emplace(key, is_causal_mask(*in[3], sq, sk)).first;
    if (!found->second) return false;
    op::fused_attention causal = a;
    causal.has_mask = false;
    causal.causal = true;
    return replace_value(m, attention, m.insert_instruction(attention, causal, {in[0], in[1], in[2]}));
}

}  // namespace

void causal_attention_masks::apply(module& m) const {
    verdicts known;
    rewrite_to_fixed_point(m,
                           {{"causal_mask", match::name("fused_attention"),
                             [&known](module& mm, const match::match_result& r) { return apply_rule(mm, r, known); }}});
}

}  // namespace kiln
