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
#include "kiln/passes.hpp"

#include "ops/fused_attention.hpp"
#include "passes/constant_value.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

constexpr double masked_out = -1e30;

// Masks of sequences up to 4096 are read; longer ones stay.
constexpr std::size_t largest_mask_read = std::size_t{1} << 24;

// Whether `mask`, broadcast to scores [.., sq, sk], adds 0 at (i, j <= i +
// sk - sq) and masks out the rest, in every matrix it holds.
bool is_causal_mask(const instruction& mask, std::size_t sq, std::size_t sk) {
    const shape& s = mask.get_shape();
    const auto& lens = s.lens();
    if (!is_floating(s.type()) || lens.size() < 2 || lens[lens.size() - 2] != sq || lens.back() != sk)
        return false;
    const auto value = constant_value(mask, largest_mask_read);
    if (!value) return false;
    const std::size_t matrices = s.elements() / (sq * sk);
    for (std::size_t b = 0; b < matrices; ++b) {
        for (std::size_t i = 0; i < sq; ++i) {
            for (std::size_t j = 0; j < sk; ++j) {
                const std::size_t flat = (b * sq + i) * sk + j;
                const double v = value->value_at(flat);
                if (j <= i + sk - sq ? v != 0 : !(v <= masked_out)) return false;
            }
        }
    }
    return true;
}

bool apply_rule(module& m, const match::match_result& r) {
    const instruction_ref attention = r.root;
    const auto& a = *attention->get_operator().get_if<op::fused_attention>();
    if (!a.has_mask || a.causal) return false;
    const auto& in = attention->inputs();
    const shape scores = a.scores_shape(attention->input_shapes());
    const auto& lens = scores.lens();
    const std::size_t sq = lens[lens.size() - 2], sk = lens.back();
    if (sq == 0 || sk < sq || !is_causal_mask(*in[3], sq, sk)) return false;
    op::fused_attention causal = a;
    causal.has_mask = false;
    causal.causal = true;
    return replace_value(m, attention, m.insert_instruction(attention, causal, {in[0], in[1], in[2]}));
}

}  // namespace

void causal_attention_masks::apply(module& m) const {
    rewrite_to_fixed_point(m, {{"causal_mask", match::name("fused_attention"), apply_rule}});
}

}  // namespace kiln
