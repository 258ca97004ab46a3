#include "ops/shape_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

std::string to_text(const std::vector<std::int64_t>& v) {
    std::string out = "{";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return out + "}";
}

std::size_t product(const std::vector<std::size_t>& lens, std::size_t begin, std::size_t end) {
    std::size_t p = 1;
    for (std::size_t i = begin; i < end; ++i) p *= lens[i];
    return p;
}

// Extent-1 dims never move the address, so give them the stride a standard
// shape would have: views of standard inputs then stay standard(), which lets
// later reshapes stay views too.
shape tidy_shape(dtype t, std::vector<std::size_t> lens, std::vector<std::size_t> strides) {
    for (std::size_t d = lens.size(); d-- > 0;)
        if (lens[d] == 1)
            strides[d] = d + 1 == lens.size() ? 1 : strides[d + 1] * std::max<std::size_t>(lens[d + 1], 1);
    return {t, std::move(lens), std::move(strides)};
}

// A layout with no elements never addresses memory; keep its offset at 0 so a
// clamped start past the end cannot point outside the input's buffer.
view_layout make_layout(dtype t, std::vector<std::size_t> lens, std::vector<std::size_t> strides, std::size_t offset) {
    shape s = tidy_shape(t, std::move(lens), std::move(strides));
    if (s.elements() == 0) offset = 0;
    return {std::move(s), offset};
}

// ONNX Slice clamping: negative values count from the end, then [0, dim].
std::int64_t clamp_index(std::int64_t v, std::int64_t dim) {
    if (v < 0) v += dim;
    return std::clamp<std::int64_t>(v, 0, dim);
}

// The three members every view op shares, written once on top of layout().
template <class Op>
shape view_shape(const Op& op, const std::vector<shape>& inputs) {
    ops::expect_inputs(op.name(), inputs, 1);
    return op.layout(inputs[0]).s;
}

template <class Op>
argument view_alias(const Op& op, const std::vector<argument>& inputs) {
    const argument& in = inputs.at(0);
    view_layout l = op.layout(in.get_shape());
    return in.reshaped(l.s, l.offset * in.get_shape().element_size());
}

// Copies the elements of `src` in row-major order into the standard `dst`
// (same element count, other lens).
void copy_row_major(const argument& src, const argument& dst) {
    const shape& s = src.get_shape();
    copy_values(src, dst.reshaped(shape{s.type(), s.lens(), shape::standard_strides(s.lens())}));
}

}  // namespace

#define KILN_DEFINE_VIEW_OP(STRUCT)                                                           \
    shape STRUCT::compute_shape(const std::vector<shape>& inputs) const {                     \
        return view_shape(*this, inputs);                                                     \
    }                                                                                         \
    argument STRUCT::compute_alias(const shape&, const std::vector<argument>& inputs) const { \
        return view_alias(*this, inputs);                                                     \
    }                                                                                         \
    void STRUCT::compute(const argument& result, const std::vector<argument>& inputs) const { \
        copy_values(view_alias(*this, inputs), result);                                       \
    }

KILN_DEFINE_VIEW_OP(transpose)
KILN_DEFINE_VIEW_OP(broadcast)
KILN_DEFINE_VIEW_OP(slice)
KILN_DEFINE_VIEW_OP(squeeze)
KILN_DEFINE_VIEW_OP(unsqueeze)
KILN_DEFINE_VIEW_OP(split)
#undef KILN_DEFINE_VIEW_OP

// ---- reshape ----

shape reshape::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    const shape& in = inputs[0];
    std::vector<std::size_t> lens;
    std::size_t known = 1;
    std::size_t inferred = dims.size();  // none
    for (std::size_t i = 0; i < dims.size(); ++i) {
        std::int64_t d = dims[i];
        if (d == -1) {
            if (inferred != dims.size()) fail("reshape: dims " + to_text(dims) + " has more than one -1");
            inferred = i;
            lens.push_back(1);
            continue;
        }
        if (d < -1)
            fail("reshape: dims[" + std::to_string(i) + "] = " + std::to_string(d) + " in " + to_text(dims) +
                 " is negative; only -1 (infer this dim) is allowed");
        if (d == 0) {
            if (i >= in.ndim())
                fail("reshape: dims[" + std::to_string(i) + "] is 0 (copy the input's dim) but the input " +
                     to_string(in.lens()) + " has only " + std::to_string(in.ndim()) + " dims");
            lens.push_back(in.lens()[i]);
        } else {
            lens.push_back(static_cast<std::size_t>(d));
        }
        known *= lens.back();
    }
    const std::size_t count = in.elements();
    if (inferred != dims.size()) {
        if (known == 0 || count % known != 0)
            fail("reshape: cannot infer the -1 in dims " + to_text(dims) + ": " + std::to_string(count) +
                 " elements of input " + to_string(in.lens()) + " do not divide into the other dims");
        lens[inferred] = count / known;
    } else if (known != count) {
        fail("reshape: cannot reshape input " + to_string(in.lens()) + " (" + std::to_string(count) +
             " elements) to dims " + to_text(dims) + " (" + std::to_string(known) + " elements)");
    }
    return {in.type(), lens};
}

int reshape::output_alias(const std::vector<shape>& inputs) const {
    return inputs.size() == 1 && inputs[0].standard() ? 0 : -1;
}

argument reshape::compute_alias(const shape& out, const std::vector<argument>& inputs) const {
    return inputs.at(0).reshaped(out);
}

void reshape::compute(const argument& result, const std::vector<argument>& inputs) const {
    copy_row_major(inputs[0], result);
}

// ---- transpose ----

view_layout transpose::layout(const shape& in) const {
    const std::size_t rank = in.ndim();
    std::vector<std::int64_t> perm = permutation;
    if (perm.empty())
        for (std::size_t i = rank; i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
    std::vector<bool> seen(rank, false);
    bool valid = perm.size() == rank;
    for (std::size_t i = 0; valid && i < perm.size(); ++i) {
        valid = perm[i] >= 0 && perm[i] < static_cast<std::int64_t>(rank) && !seen[static_cast<std::size_t>(perm[i])];
        if (valid) seen[static_cast<std::size_t>(perm[i])] = true;
    }
    if (!valid)
        fail("transpose: permutation " + to_text(permutation) + " is not a permutation of 0.." +
             std::to_string(static_cast<std::int64_t>(rank) - 1) + " for input " + to_string(in.lens()) + " of rank " +
             std::to_string(rank));
    std::vector<std::size_t> lens, strides;
    for (auto p : perm) {
        lens.push_back(in.lens()[static_cast<std::size_t>(p)]);
        strides.push_back(in.strides()[static_cast<std::size_t>(p)]);
    }
    return make_layout(in.type(), std::move(lens), std::move(strides), 0);
}

// ---- broadcast ----

view_layout broadcast::layout(const shape& in) const {
    if (out_lens.size() < in.ndim())
        fail("broadcast: cannot broadcast input " + to_string(in.lens()) + " of rank " + std::to_string(in.ndim()) +
             " to out_lens " + to_string(out_lens) + " of lower rank");
    const std::size_t lead = out_lens.size() - in.ndim();
    std::vector<std::size_t> strides(out_lens.size(), 0);
    for (std::size_t i = 0; i < in.ndim(); ++i) {
        std::size_t l = in.lens()[i];
        std::size_t o = out_lens[lead + i];
        if (l == o)
            strides[lead + i] = in.strides()[i];
        else if (l != 1)
            fail("broadcast: input " + to_string(in.lens()) + " cannot be broadcast to out_lens " +
                 to_string(out_lens) + ": input dim " + std::to_string(i) + " has extent " + std::to_string(l) +
                 ", expected 1 or " + std::to_string(o));
    }
    return make_layout(in.type(), out_lens, std::move(strides), 0);
}

// ---- slice ----

view_layout slice::layout(const shape& in) const {
    if (starts.size() != ends.size())
        fail("slice: starts " + to_text(starts) + " and ends " + to_text(ends) + " must have the same length");
    std::vector<std::int64_t> axis_list = axes;
    if (axis_list.empty())
        for (std::size_t k = 0; k < starts.size(); ++k) axis_list.push_back(static_cast<std::int64_t>(k));
    if (axis_list.size() != starts.size())
        fail("slice: axes " + to_text(axes) + " and starts " + to_text(starts) + " must have the same length");
    if (!steps.empty() && steps.size() != starts.size())
        fail("slice: steps " + to_text(steps) + " and starts " + to_text(starts) + " must have the same length");
    auto dims = ops::normalize_axes(name(), axis_list, in.ndim());

    std::vector<std::size_t> lens = in.lens();
    std::vector<std::size_t> strides = in.strides();
    std::size_t offset = 0;
    for (std::size_t k = 0; k < dims.size(); ++k) {
        const std::size_t d = dims[k];
        const std::int64_t step = steps.empty() ? 1 : steps[k];
        if (step < 0)
            fail("slice: steps[" + std::to_string(k) + "] = " + std::to_string(step) +
                 ": negative steps are not supported yet");
        if (step == 0) fail("slice: steps[" + std::to_string(k) + "] is 0; each step must be >= 1");
        const auto extent = static_cast<std::int64_t>(lens[d]);
        const std::int64_t start = clamp_index(starts[k], extent);
        const std::int64_t end = clamp_index(ends[k], extent);
        const std::int64_t count = end > start ? (end - start + step - 1) / step : 0;
        offset += static_cast<std::size_t>(start) * strides[d];
        lens[d] = static_cast<std::size_t>(count);
        strides[d] *= static_cast<std::size_t>(step);
    }
    return make_layout(in.type(), std::move(lens), std::move(strides), offset);
}

// ---- concat ----

shape concat::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.empty()) fail("concat: expected at least 1 input, got 0");
    ops::expect_same_type(name(), inputs);
    const shape& first = inputs[0];
    const std::size_t a = ops::normalize_axis(name(), axis, first.ndim());
    std::vector<std::size_t> lens = first.lens();
    for (std::size_t k = 1; k < inputs.size(); ++k) {
        const auto& other = inputs[k].lens();
        bool compatible = other.size() == lens.size();
        for (std::size_t d = 0; compatible && d < lens.size(); ++d) compatible = d == a || other[d] == lens[d];
        if (!compatible)
            fail("concat: input " + std::to_string(k) + " has shape " + to_string(other) + " but input 0 has " +
                 to_string(first.lens()) + "; they may differ only in axis " + std::to_string(a));
        lens[a] += other[a];
    }
    return {first.type(), lens};
}

void concat::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& out = result.get_shape();
    const std::size_t a = ops::normalize_axis(name(), axis, out.ndim());
    std::size_t start = 0;
    for (const auto& in : inputs) {
        // Each input lands in a window of the result: its lens, the result's strides.
        const shape& s = in.get_shape();
        argument window =
            result.reshaped(shape{s.type(), s.lens(), out.strides()}, start * out.strides()[a] * out.element_size());
        if (s.elements() != 0) copy_values(in, window);
        start += s.lens()[a];
    }
}

// ---- squeeze ----

view_layout squeeze::layout(const shape& in) const {
    std::vector<bool> drop(in.ndim(), false);
    if (axes.empty()) {
        for (std::size_t d = 0; d < in.ndim(); ++d) drop[d] = in.lens()[d] == 1;
    } else {
        for (auto d : ops::normalize_axes(name(), axes, in.ndim())) {
            if (in.lens()[d] != 1)
                fail("squeeze: cannot squeeze axis " + std::to_string(d) + " of input " + to_string(in.lens()) +
                     ": its extent is " + std::to_string(in.lens()[d]) + ", not 1");
            drop[d] = true;
        }
    }
    std::vector<std::size_t> lens, strides;
    for (std::size_t d = 0; d < in.ndim(); ++d)
        if (!drop[d]) {
            lens.push_back(in.lens()[d]);
            strides.push_back(in.strides()[d]);
        }
    return make_layout(in.type(), std::move(lens), std::move(strides), 0);
}

// ---- unsqueeze ----

view_layout unsqueeze::layout(const shape& in) const {
    const std::size_t rank = in.ndim() + axes.size();
    std::vector<bool> inserted(rank, false);
    for (auto d : ops::normalize_axes(name(), axes, rank)) inserted[d] = true;
    std::vector<std::size_t> lens, strides;
    std::size_t next = 0;  // next input dim
    for (std::size_t d = 0; d < rank; ++d) {
        if (inserted[d]) {
            lens.push_back(1);
            strides.push_back(0);  // set by make_layout
        } else {
            lens.push_back(in.lens()[next]);
            strides.push_back(in.strides()[next]);
            ++next;
        }
    }
    return make_layout(in.type(), std::move(lens), std::move(strides), 0);
}

// ---- flatten ----

shape flatten::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    const shape& in = inputs[0];
    const auto rank = static_cast<std::int64_t>(in.ndim());
    if (axis < -rank || axis > rank)
        fail("flatten: axis " + std::to_string(axis) + " is out of range for input " + to_string(in.lens()) +
             " of rank " + std::to_string(rank) + " (valid: " + std::to_string(-rank) + " to " + std::to_string(rank) +
             ")");
    const auto a = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
    return {in.type(), {product(in.lens(), 0, a), product(in.lens(), a, in.ndim())}};
}

int flatten::output_alias(const std::vector<shape>& inputs) const {
    return inputs.size() == 1 && inputs[0].standard() ? 0 : -1;
}

argument flatten::compute_alias(const shape& out, const std::vector<argument>& inputs) const {
    return inputs.at(0).reshaped(out);
}

void flatten::compute(const argument& result, const std::vector<argument>& inputs) const {
    copy_row_major(inputs[0], result);
}

// ---- split ----

view_layout split::layout(const shape& in) const {
    const std::size_t a = ops::normalize_axis(name(), axis, in.ndim());
    const std::size_t extent = in.lens()[a];
    std::vector<std::size_t> pieces;
    if (sizes.empty()) {
        if (num_outputs < 1)
            fail("split: give `sizes` or a `num_outputs` >= 1 (got num_outputs = " + std::to_string(num_outputs) + ")");
        const auto n = static_cast<std::size_t>(num_outputs);
        if (extent % n != 0)
            fail("split: axis " + std::to_string(a) + " of input " + to_string(in.lens()) + " has extent " +
                 std::to_string(extent) + ", which does not split into " + std::to_string(n) +
                 " equal pieces; give `sizes` instead");
        pieces.assign(n, extent / n);
    } else {
        if (num_outputs != 0 && num_outputs != static_cast<std::int64_t>(sizes.size()))
            fail("split: num_outputs = " + std::to_string(num_outputs) + " disagrees with the " +
                 std::to_string(sizes.size()) + " entries of sizes " + to_text(sizes));
        std::size_t total = 0;
        for (auto s : sizes) {
            if (s < 0) fail("split: sizes " + to_text(sizes) + " has a negative entry");
            pieces.push_back(static_cast<std::size_t>(s));
            total += pieces.back();
        }
        if (total != extent)
            fail("split: sizes " + to_text(sizes) + " sum to " + std::to_string(total) + " but axis " +
                 std::to_string(a) + " of input " + to_string(in.lens()) + " has extent " + std::to_string(extent));
    }
    if (output < 0 || output >= static_cast<std::int64_t>(pieces.size()))
        fail("split: output " + std::to_string(output) + " is out of range: there are " +
             std::to_string(pieces.size()) + " pieces");
    const auto index = static_cast<std::size_t>(output);
    std::size_t start = 0;
    for (std::size_t k = 0; k < index; ++k) start += pieces[k];
    std::vector<std::size_t> lens = in.lens();
    lens[a] = pieces[index];
    return make_layout(in.type(), std::move(lens), in.strides(), start * in.strides()[a]);
}

// ---- contiguous ----

shape contiguous::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    return inputs[0].as_standard();
}

void contiguous::compute(const argument& result, const std::vector<argument>& inputs) const {
    copy_values(inputs[0], result);
}

// ---- pad ----

shape pad::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    const shape& in = inputs[0];
    const std::size_t rank = in.ndim();
    if (pads.size() != 2 * rank)
        fail("pad: pads " + to_text(pads) + " has " + std::to_string(pads.size()) + " values but input " +
             to_string(in.lens()) + " of rank " + std::to_string(rank) + " needs " + std::to_string(2 * rank) +
             " (all begins, then all ends)");
    for (std::size_t i = 0; i < pads.size(); ++i)
        if (pads[i] < 0)
            fail("pad: pads[" + std::to_string(i) + "] = " + std::to_string(pads[i]) +
                 " is negative; pad only grows a tensor (use slice to crop)");
    std::vector<std::size_t> lens = in.lens();
    for (std::size_t d = 0; d < rank; ++d) {
        const auto begin = static_cast<std::size_t>(pads[d]);
        const auto end = static_cast<std::size_t>(pads[rank + d]);
        if (mode == pad_mode::reflect && (begin >= lens[d] || end >= lens[d]) && (begin > 0 || end > 0))
            fail("pad: reflect mode needs pads smaller than the extent of each padded dim, but dim " +
                 std::to_string(d) + " of input " + to_string(in.lens()) + " has extent " + std::to_string(lens[d]) +
                 " and pads " + std::to_string(begin) + ", " + std::to_string(end));
        if (mode == pad_mode::edge && lens[d] == 0 && (begin > 0 || end > 0))
            fail("pad: edge mode cannot pad dim " + std::to_string(d) + " of input " + to_string(in.lens()) +
                 ": it is empty");
        lens[d] += begin + end;
    }
    return {in.type(), lens};
}

namespace {
// The pad value in T: saturating for integers, NaN becomes 0 there.
template <class T>
T fill_value(double v) {
    if constexpr (std::is_same_v<T, bool>) {
        return v != 0.0;
    } else if constexpr (is_float_like_v<T>) {
        return T(static_cast<float>(v));
    } else {
        if (std::isnan(v)) return T{0};
        if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
        if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
        return static_cast<T>(v);
    }
}
}  // namespace

// Row by row along the last dim: the outer index picks the source row (or
// none, a row of fill), then the row is fill, a copy of the source row and
// fill, with reflect / edge positions mapped one by one at the two ends.
void pad::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& in = inputs[0].get_shape();
    const shape& out = result.get_shape();
    const std::size_t rank = in.ndim();
    if (out.elements() == 0) return;
    // Source position along dim d of output position o; -1 for a constant pad.
    auto source = [&](std::size_t d, std::size_t o) -> std::int64_t {
        const auto n = static_cast<std::int64_t>(in.lens()[d]);
        std::int64_t p = static_cast<std::int64_t>(o) - pads[d];
        if (p >= 0 && p < n) return p;
        if (mode == pad_mode::constant) return -1;
        if (mode == pad_mode::reflect) return p < 0 ? -p : 2 * (n - 1) - p;
        return std::clamp<std::int64_t>(p, 0, n - 1);
    };
    visit_type(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T fill = fill_value<T>(value);
        const T* x = inputs[0].data_as<T>();
        T* y = result.data_as<T>();
        if (rank == 0) {
            y[0] = x[0];
            return;
        }
        const std::size_t last = rank - 1, width = out.lens()[last], rows = out.elements() / width;
        const std::size_t step = in.strides()[last], n = in.lens()[last];
        const std::size_t before = static_cast<std::size_t>(std::min<std::int64_t>(pads[last], static_cast<std::int64_t>(width)));
        const std::size_t copied = n == 0 || before >= width ? 0 : std::min(n, width - before);
        std::vector<std::size_t> idx(rank, 0);
        for (std::size_t r = 0; r < rows; ++r) {
            T* row = y + r * width;
            std::int64_t offset = 0;
            for (std::size_t d = 0; d < last && offset >= 0; ++d) {
                const std::int64_t p = source(d, idx[d]);
                offset = p < 0 ? -1 : offset + p * static_cast<std::int64_t>(in.strides()[d]);
            }
            if (offset < 0) {
                std::fill(row, row + width, fill);
            } else {
                const T* src = x + offset;
                for (std::size_t o = 0; o < before; ++o) {
                    const std::int64_t p = source(last, o);
                    row[o] = p < 0 ? fill : src[static_cast<std::size_t>(p) * step];
                }
                if (step == 1)
                    std::copy(src, src + copied, row + before);
                else
                    for (std::size_t i = 0; i < copied; ++i) row[before + i] = src[i * step];
                for (std::size_t o = before + copied; o < width; ++o) {
                    const std::int64_t p = source(last, o);
                    row[o] = p < 0 ? fill : src[static_cast<std::size_t>(p) * step];
                }
            }
            for (std::size_t d = last; d-- > 0;) {
                if (++idx[d] < out.lens()[d]) break;
                idx[d] = 0;
            }
        }
    });
}

}  // namespace kiln::op
