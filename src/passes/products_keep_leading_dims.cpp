// Products over rows merged from leading dims keep those dims.
//
// torch.export decomposes a linear layer on [b, s, K] into a view to
// [b * s, K], a 2-D product and a view back: every product's rows are then
// the batch times the sequence, one length that follows two of a dynamic
// program's extents, which one program for a batch and a sequence cannot
// run (ir/run_time_extents.hpp). ONNX exports keep [b, s, K] x [K, N]. This
// pass gives the product the merged input itself: dot / fused_dot(reshape(x
// [..., K] -> [M, K]), w, bias, post operands) becomes the same op on x,
// [..., N] (x [..., H, D] with H * D = K, attention's heads before the
// output projection, is viewed as [..., K]); a post operand of the
// product's shape reads the value it was reshaped from (or a view of itself
// at the leading dims), and the product's readers that reshape it read the
// new result reshaped, the others its [M, N] view. The products compute the
// same rows in the same order.
#include <algorithm>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "ops/fused_dot.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

bool is_reshape(const instruction& ins) {
    return ins.name() == "reshape" || ins.name() == "flatten";
}

bool reshapes_only(const instruction& ins) {
    static const std::vector<std::string> names = {"reshape", "flatten", "squeeze", "unsqueeze"};
    return std::find(names.begin(), names.end(), ins.name()) != names.end();
}

instruction_ref reshaped(module& m, instruction_ref pos, instruction_ref value, const std::vector<std::size_t>& lens) {
    if (value->get_shape().lens() == lens) return value;
    return m.insert_instruction(pos, make_op("reshape", value_map{{"dims", lens_value(lens)}}), {value});
}

// How many leading dims of `lens` make the rows when the rest merge into
// columns of `k` (the most such dims: heads [.., 12, 64] merge into 768).
std::size_t leading_dims_of_rows(const std::vector<std::size_t>& lens, std::size_t k) {
    std::size_t columns = 1;
    for (std::size_t d = lens.size(); d-- > 0;) {
        columns *= lens[d];
        if (columns == k) return d;
        if (columns > k) break;
    }
    return 0;
}

rewrite_rule product_over_merged_rows() {
    auto pattern = match::any_of_names({"dot", "fused_dot"}).where([](instruction_ref ins) {
        const auto& in = ins->inputs();
        // (A product replaced here stays, read by dead reshapes only, until dead code goes.)
        const bool read = std::any_of(ins->outputs().begin(), ins->outputs().end(),
                                      [](instruction_ref o) { return o->is_return() || !o->outputs().empty(); });
        return read && in.size() >= 2 && is_reshape(*in[0]) && ins->get_shape().ndim() == 2 &&
               in[0]->get_shape().ndim() == 2;
    });
    return {"product_over_merged_rows", pattern, [](module& m, const match::match_result& r) {
                const instruction_ref x = r.root->inputs()[0]->inputs()[0];
                const shape& xs = x->get_shape();
                const shape& out = r.root->get_shape();  // [M, N]
                const std::size_t k_len = r.root->inputs()[0]->get_shape().lens()[1];
                const auto leading = leading_dims_of_rows(xs.lens(), k_len);
                if (leading < 2 || !xs.standard()) return false;
                std::vector<std::size_t> lens(xs.lens().begin(),
                                              xs.lens().begin() + static_cast<std::ptrdiff_t>(leading));
                std::vector<std::size_t> x_lens = lens;
                x_lens.push_back(k_len);
                lens.push_back(out.lens()[1]);
                const auto* fused = r.root->get_operator().get_if<op::fused_dot>();
                const std::size_t first_post = fused != nullptr ? fused->first_post_operand() : 2;
                std::vector<instruction_ref> inputs = r.root->inputs();
                inputs[0] = x;  // viewed at [..., K] below, once the product is sure to be replaced
                for (std::size_t k = first_post; k < inputs.size(); ++k) {
                    // A per-column operand broadcast over the rows is that operand.
                    if (inputs[k]->name() == "broadcast") {
                        const shape& column = inputs[k]->inputs()[0]->get_shape();
                        if (column.ndim() > 0 && column.lens().back() == out.lens()[1] &&
                            column.elements() == out.lens()[1])
                            inputs[k] = inputs[k]->inputs()[0];
                    }
                    const shape& s = inputs[k]->get_shape();
                    if (s.lens() != out.lens()) {
                        // An operand that varies along the columns only ([N], [1, N]) broadcasts at any rank.
                        if (s.ndim() > 2 || (s.ndim() == 2 && s.lens()[0] != 1)) return false;
                        continue;
                    }
                    if (is_reshape(*inputs[k]) && inputs[k]->inputs()[0]->get_shape().lens() == lens &&
                        inputs[k]->inputs()[0]->get_shape().standard())
                        inputs[k] = inputs[k]->inputs()[0];
                    else if (!s.standard())
                        return false;
                }
                // With the post operands of the product's shape at the leading
                // dims (the weight [K, N] may have the product's lengths too).
                std::vector<shape> input_shapes;
                for (std::size_t k = 0; k < inputs.size(); ++k) {
                    const shape& s = inputs[k]->get_shape();
                    input_shapes.push_back(k >= first_post && s.lens() == out.lens() ? shape(s.type(), lens) : s);
                }
                input_shapes[0] = shape(xs.type(), x_lens);
                try {
                    const shape kept = r.root->get_operator().compute_shape(input_shapes);
                    if (kept.lens() != lens || kept.type() != out.type() || !kept.standard()) return false;
                } catch (const error&) {
                    return false;
                }
                inputs[0] = reshaped(m, r.root, x, x_lens);
                for (std::size_t k = first_post; k < inputs.size(); ++k)
                    if (inputs[k]->get_shape().lens() == out.lens()) inputs[k] = reshaped(m, r.root, inputs[k], lens);
                const instruction_ref product = m.insert_instruction(r.root, r.root->get_operator(), inputs);
                const auto readers = r.root->outputs();
                instruction_ref rows = m.end();
                for (const auto& reader : readers) {
                    if (reader->is_return() || !reshapes_only(*reader)) {
                        if (rows == m.end()) rows = reshaped(m, r.root, product, out.lens());
                        m.replace_input(reader, r.root, rows);
                        continue;
                    }
                    const instruction_ref again = reshaped(m, reader, product, reader->get_shape().lens());
                    m.replace_all_uses(reader, again);
                }
                return true;
            }};
}

}  // namespace

void products_keep_leading_dims::apply(module& m) const {
    rewrite_to_fixed_point(m, {product_over_merged_rows()});
}

}  // namespace kiln
