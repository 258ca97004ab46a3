#include "ir/extent_independence.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace kiln {

namespace {

bool same_literal(const literal& a, const literal& b) {
    if (a.get_shape() != b.get_shape()) return false;
    // Programs imported from one source share their weights' storage: equal
    // without reading them (once one of them is lowered, reading a handed-over
    // literal restores it from the kernel's copy, per call).
    if (a.shares_storage_with(b)) return true;
    const argument x = a.get_argument();
    const argument y = b.get_argument();
    const std::size_t bytes = x.get_shape().bytes();
    // One buffer (a derived weight the programs share, passes/shared_derived_values):
    // equal without comparing its bytes (GPT-2's weights are 500 MB).
    if (bytes == y.get_shape().bytes() && x.data() == y.data()) return true;
    return bytes == y.get_shape().bytes() && (bytes == 0 || std::memcmp(x.data(), y.data(), bytes) == 0);
}

// A view at a batch of 1 may be standard where the same view of a larger
// batch is not (a slice of each sequence's first row): a stride only
// matters where its dimension has more than one element at both ends.
bool same_strides_where_both_are_longer_than_one(const shape& a, const shape& b) {
    if (a.is_tuple() || b.is_tuple()) return false;
    for (std::size_t d = 0; d < a.ndim(); ++d)
        if (a.lens()[d] > 1 && b.lens()[d] > 1 && a.strides()[d] != b.strides()[d]) return false;
    return true;
}

bool is_reshape_like(const instruction& ins) {
    const std::string n = ins.name();
    return n == "reshape" || n == "squeeze" || n == "unsqueeze" || n == "flatten";
}

// Two reshapes (or squeezes, unsqueezes, flattens) written differently,
// where `a`'s gives `b`'s lengths from `b`'s input: [0, 1, 1, -1] and
// [0, 0, -1, 1] both turn [1, 1] into [1, 1, 1, 1] (a padding mask at a
// sequence of one), and a reshape that only drops unit dimensions is a
// squeeze there. Each keeps the elements in row-major order, so equal
// lengths are equal values.
bool same_reshape_at_both(const instruction& a, const instruction& b) {
    if (!is_reshape_like(a) || !is_reshape_like(b) || a.inputs().size() != 1 || b.inputs().size() != 1) return false;
    try {
        return a.get_operator().compute_shape({b.inputs()[0]->get_shape()}).lens() == b.get_shape().lens();
    } catch (const error&) {
        return false;
    }
}

}  // namespace

std::size_t adopt_reshapes_that_fit_both(module& a, const module& b) {
    if (a.size() != b.size()) return 0;
    std::size_t changed = 0;
    auto ib = b.begin();
    for (auto ia = a.begin(); ia != a.end(); ++ia, ++ib) {
        if (ia->name() != "reshape" || ib->name() != "reshape" || ia->get_operator() == ib->get_operator() ||
            ia->inputs().size() != 1 || ib->inputs().size() != 1 || same_reshape_at_both(*ia, *ib))
            continue;
        try {
            if (ib->get_operator().compute_shape({ia->inputs()[0]->get_shape()}) != ia->get_shape()) continue;
        } catch (const error&) {
            continue;
        }
        a.replace_instruction(ia, ib->get_operator(), {ia->inputs()[0]});
        ++changed;
    }
    return changed;
}

bool is_leading_part_of(const literal& part, const literal& whole) {
    const shape& p = part.get_shape();
    const shape& w = whole.get_shape();
    if (p.is_tuple() || w.is_tuple() || p.type() != w.type() || p.ndim() != w.ndim() || !p.standard() || !w.standard())
        return false;
    std::optional<std::size_t> cut;
    for (std::size_t d = 0; d < p.ndim(); ++d) {
        if (p.lens()[d] == w.lens()[d]) continue;
        if (cut || p.lens()[d] > w.lens()[d]) return false;
        cut = d;
    }
    if (!cut) return false;
    // Rows of the cut dimension and everything inside it, per index of the dimensions outside it.
    std::size_t outer = 1;
    for (std::size_t d = 0; d < *cut; ++d) outer *= p.lens()[d];
    const std::size_t inner_bytes = p.bytes() / std::max<std::size_t>(1, outer * p.lens()[*cut]);
    const std::size_t part_bytes = inner_bytes * p.lens()[*cut];
    const std::size_t whole_bytes = inner_bytes * w.lens()[*cut];
    const argument x = part.get_argument();
    const argument y = whole.get_argument();
    for (std::size_t o = 0; o < outer; ++o)
        if (part_bytes > 0 && std::memcmp(x.data() + o * part_bytes, y.data() + o * whole_bytes, part_bytes) != 0)
            return false;
    return true;
}

std::string first_difference_besides_extents(const module& a, const module& b, bool* literals_may_vary) {
    if (a.size() != b.size())
        return "the optimised module has " + std::to_string(a.size()) + " instructions at one extent and " +
               std::to_string(b.size()) + " at the other";
    const auto names = a.instruction_names();
    // Position of each instruction in its module, to compare inputs.
    std::unordered_map<const instruction*, std::size_t> position_a;
    std::unordered_map<const instruction*, std::size_t> position_b;
    auto ia = a.begin();
    auto ib = b.begin();
    for (std::size_t i = 0; ia != a.end(); ++ia, ++ib, ++i) {
        position_a[&*ia] = i;
        position_b[&*ib] = i;
        const std::string at = names.at(&*ia) + " = " + ia->name();
        if (!ia->module_inputs().empty() || !ib->module_inputs().empty())
            return at + ": takes submodules, which are not compared";
        if (ia->name() != ib->name() && !same_reshape_at_both(*ia, *ib))
            return at + ": another op (" + ib->name() + ") at the other extent";
        // A parameter's op holds its shape; its name and its result's dtype and rank are compared below.
        if (!ia->is_param() && !ia->is_literal() && ia->get_operator() != ib->get_operator() &&
            !same_reshape_at_both(*ia, *ib))
            return at + ": its op or attributes differ (" + to_string(ia->get_operator()) + " against " +
                   to_string(ib->get_operator()) + ")";
        if (ia->inputs().size() != ib->inputs().size()) return at + ": its number of inputs differs";
        for (std::size_t k = 0; k < ia->inputs().size(); ++k)
            if (position_a.at(&*ia->inputs()[k]) != position_b.at(&*ib->inputs()[k]))
                return at + ": its input " + std::to_string(k) + " differs";
        if (ia->is_param() && ia->param_name() != ib->param_name()) return at + ": another parameter";
        const bool literal_cut_short = ia->is_literal() && literals_may_vary != nullptr &&
                                       is_leading_part_of(ib->get_literal(), ia->get_literal());
        if (literal_cut_short) *literals_may_vary = true;
        if (ia->is_literal() && !literal_cut_short && !same_literal(ia->get_literal(), ib->get_literal()))
            return at + ": a constant that depends on the extent (" + to_string(ia->get_shape()) + " against " +
                   to_string(ib->get_shape()) + ")";
        const shape& sa = ia->get_shape();
        const shape& sb = ib->get_shape();
        if (sa.is_tuple() != sb.is_tuple() || sa.type() != sb.type() || sa.ndim() != sb.ndim() ||
            (sa.standard() != sb.standard() && !same_strides_where_both_are_longer_than_one(sa, sb)))
            return at + ": its result's dtype, rank or layout differs (" + to_string(sa) + " against " +
                   to_string(sb) + ")";
    }
    return {};
}

}  // namespace kiln
