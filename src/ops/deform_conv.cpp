#include "ops/deform_conv.hpp"

#include <cmath>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

// All elements of an argument in row-major order (any strides), as doubles.
std::vector<double> values_of(const argument& a) {
    std::vector<double> v(a.get_shape().elements());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = a.value_at(i);
    return v;
}

}  // namespace

shape deform_conv::compute_shape(const std::vector<shape>& inputs) const {
    const std::size_t expected = 3 + (has_bias ? 1 : 0) + (has_mask ? 1 : 0);
    ops::expect_inputs(name(), inputs, expected);
    const shape& x = inputs[0];
    const shape& w = inputs[1];
    const shape& off = inputs[2];
    ops::expect_floating(name(), x, "x");
    for (const auto& s : inputs)
        if (s.type() != x.type()) fail("deform_conv: every input must have the type of x");
    if (x.ndim() != 4 || w.ndim() != 4 || off.ndim() != 4)
        fail("deform_conv: x, w and offset must be 4-D (2-D convolution), got " + to_string(x.lens()) + ", " +
             to_string(w.lens()) + ", " + to_string(off.lens()));
    if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
        fail("deform_conv: strides and dilations need 2 values, pads 4");
    for (std::size_t d = 0; d < 2; ++d)
        if (strides[d] < 1 || dilations[d] < 1 || pads[d] < 0 || pads[d + 2] < 0)
            fail("deform_conv: strides and dilations must be positive, pads non-negative");
    if (group < 1 || offset_group < 1) fail("deform_conv: group and offset_group must be positive");
    const std::size_t n = x.lens()[0], c = x.lens()[1], oc = w.lens()[0];
    const auto g = static_cast<std::size_t>(group), og = static_cast<std::size_t>(offset_group);
    if (c % g != 0 || oc % g != 0 || w.lens()[1] * g != c)
        fail("deform_conv: w " + to_string(w.lens()) + " does not fit x " + to_string(x.lens()) + " in " +
             std::to_string(group) + " groups");
    if (c % og != 0) fail("deform_conv: the channels must split evenly into offset_group groups");
    const std::size_t kh = w.lens()[2], kw = w.lens()[3];
    std::vector<std::size_t> out{n, oc, 0, 0};
    for (std::size_t d = 0; d < 2; ++d) {
        const auto span = static_cast<std::int64_t>(x.lens()[d + 2]) + pads[d] + pads[d + 2] -
                          (dilations[d] * (static_cast<std::int64_t>(d == 0 ? kh : kw) - 1) + 1);
        if (span < 0) fail("deform_conv: the kernel does not fit the padded input");
        out[d + 2] = static_cast<std::size_t>(span / strides[d] + 1);
    }
    if (off.lens() != std::vector<std::size_t>{n, og * 2 * kh * kw, out[2], out[3]})
        fail("deform_conv: offset must be " + to_string(std::vector<std::size_t>{n, og * 2 * kh * kw, out[2], out[3]}) +
             ", got " + to_string(off.lens()));
    if (has_bias && inputs[3].lens() != std::vector<std::size_t>{oc})
        fail("deform_conv: bias must be [" + std::to_string(oc) + "], got " + to_string(inputs[3].lens()));
    if (has_mask && inputs[expected - 1].lens() != std::vector<std::size_t>{n, og * kh * kw, out[2], out[3]})
        fail("deform_conv: mask must be " + to_string(std::vector<std::size_t>{n, og * kh * kw, out[2], out[3]}) +
             ", got " + to_string(inputs[expected - 1].lens()));
    return {x.type(), out};
}

void deform_conv::compute(const argument& result, const std::vector<argument>& inputs) const {
    const auto& xl = inputs[0].get_shape().lens();
    const auto& wl = inputs[1].get_shape().lens();
    const auto& yl = result.get_shape().lens();
    const std::size_t n_ = xl[0], c = xl[1], h = xl[2], w = xl[3];
    const std::size_t oc = wl[0], cpg = wl[1], kh = wl[2], kw = wl[3], k = kh * kw;
    const std::size_t oh_ = yl[2], ow_ = yl[3];
    const std::size_t ocpg = oc / static_cast<std::size_t>(group);
    const std::size_t c_per_og = c / static_cast<std::size_t>(offset_group);
    const auto x = values_of(inputs[0]);
    const auto wt = values_of(inputs[1]);
    const auto off = values_of(inputs[2]);
    const std::vector<double> bias = has_bias ? values_of(inputs[3]) : std::vector<double>(oc, 0.0);
    const std::vector<double> mask = has_mask ? values_of(inputs[inputs.size() - 1]) : std::vector<double>{};
    const std::size_t og = static_cast<std::size_t>(offset_group);
    auto read = [&](std::size_t n, std::size_t ch, double y, double xx) {
        const double fy = std::floor(y), fx = std::floor(xx);
        double acc = 0;
        for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) {
                const double yy = fy + a, xc = fx + b;
                if (yy < 0 || yy >= static_cast<double>(h) || xc < 0 || xc >= static_cast<double>(w)) continue;
                const double wy = a == 0 ? 1 - (y - fy) : y - fy;
                const double wx = b == 0 ? 1 - (xx - fx) : xx - fx;
                acc += wy * wx *
                       x[((n * c + ch) * h + static_cast<std::size_t>(yy)) * w + static_cast<std::size_t>(xc)];
            }
        return acc;
    };
    std::vector<double> out(result.get_shape().elements(), 0.0);
    for (std::size_t n = 0; n < n_; ++n)
        for (std::size_t o = 0; o < oc; ++o) {
            const std::size_t grp = o / ocpg;
            for (std::size_t oy = 0; oy < oh_; ++oy)
                for (std::size_t ox = 0; ox < ow_; ++ox) {
                    double acc = bias[o];
                    for (std::size_t ci = 0; ci < cpg; ++ci) {
                        const std::size_t ch = grp * cpg + ci;
                        const std::size_t g = ch / c_per_og;
                        for (std::size_t i = 0; i < kh; ++i)
                            for (std::size_t j = 0; j < kw; ++j) {
                                const std::size_t tap = i * kw + j;
                                auto plane = [&](std::size_t channel) {
                                    return ((n * og * 2 * k + channel) * oh_ + oy) * ow_ + ox;
                                };
                                const double dy = off[plane(g * 2 * k + 2 * tap)];
                                const double dx = off[plane(g * 2 * k + 2 * tap + 1)];
                                const double y = static_cast<double>(oy) * static_cast<double>(strides[0]) -
                                                 static_cast<double>(pads[0]) +
                                                 static_cast<double>(i) * static_cast<double>(dilations[0]) + dy;
                                const double xx = static_cast<double>(ox) * static_cast<double>(strides[1]) -
                                                  static_cast<double>(pads[1]) +
                                                  static_cast<double>(j) * static_cast<double>(dilations[1]) + dx;
                                const double m =
                                    has_mask ? mask[((n * og * k + g * k + tap) * oh_ + oy) * ow_ + ox] : 1.0;
                                acc += wt[((o * cpg + ci) * kh + i) * kw + j] * read(n, ch, y, xx) * m;
                            }
                    }
                    out[((n * oc + o) * oh_ + oy) * ow_ + ox] = acc;
                }
        }
    visit_type(result.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            T* y = result.data_as<T>();
            for (std::size_t i = 0; i < out.size(); ++i) y[i] = T(static_cast<ops::compute_t<T>>(out[i]));
        }
    });
}

}  // namespace kiln::op
