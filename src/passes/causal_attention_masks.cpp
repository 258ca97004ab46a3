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
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "kiln/passes.hpp"
#include "ops/fused_attention.hpp"
#include "passes/constant_value.hpp"
#include "passes/matcher.hpp"
#include "passes/narrowed_value.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

constexpr double masked_out = -1e30;

// Masks of sequences up to 4096 are read; longer ones stay.
constexpr std::size_t largest_mask_read = std::size_t{1} << 24;

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
    // Exports expand the mask over the batch ([64, 1, 2048, 2048] is a
    // gigabyte): it is read with length 1 along the dims it repeats along
    // (passes/narrowed_value.hpp), whole where it repeats along none.
    std::vector<std::size_t> matrices_dims;
    for (std::size_t d = 0; d + 2 < lens.size(); ++d)
        if (lens[d] > 1) matrices_dims.push_back(d);
    narrowing how;
    how.is_constant = [](const instruction& ins) { return match::is_constant_instruction(ins); };
    how.whole_value = [](const instruction& ins) { return constant_value(ins, largest_mask_read); };
    how.max_bytes = largest_mask_read * sizeof(double);
    auto value = narrowed_value(mask, matrices_dims, how);
    if (!value) value = constant_value(mask, largest_mask_read);
    return value && holds_causal_matrices(*value, value->get_shape().elements() / (sq * sk), sq, sk);
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
