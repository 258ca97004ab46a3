#include "ops/dft.hpp"

#include <cmath>
#include <complex>
#include <numbers>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

// The transform axis within the input's rank, which may not be the last
// (real / imaginary) dim.
std::size_t signal_axis(const std::string& op, std::int64_t axis, const shape& in) {
    const std::size_t a = ops::normalize_axis(op, axis, in.ndim());
    if (a + 1 == in.ndim()) fail(op + ": the axis cannot be the last dim, which holds real and imaginary parts");
    return a;
}

}  // namespace

shape dft::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    const shape& in = inputs[0];
    ops::expect_floating(name(), in);
    if (in.ndim() < 2 || (in.lens().back() != 1 && in.lens().back() != 2))
        fail(name() + ": input must be [..., 1] (real) or [..., 2] (complex), got " + to_string(in.lens()));
    const std::size_t a = signal_axis(name(), axis, in);
    if (length < 1) fail(name() + ": length must be positive, got " + std::to_string(length));
    if (onesided && !inverse && in.lens().back() != 1)
        fail(name() + ": a one-sided forward transform needs real input");
    if (onesided && inverse && in.lens().back() != 2)
        fail(name() + ": a one-sided inverse transform needs complex input");
    auto lens = in.lens();
    const auto n = static_cast<std::size_t>(length);
    lens[a] = onesided && !inverse ? n / 2 + 1 : n;
    lens.back() = onesided && inverse ? 1 : 2;
    return {in.type(), lens};
}

void dft::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& xs = inputs[0].get_shape();
    const shape& rs = result.get_shape();
    const std::size_t a = signal_axis(name(), axis, xs);
    const auto n = static_cast<std::size_t>(length);
    const bool complex_in = xs.lens().back() == 2;
    const std::size_t in_len = xs.lens()[a], out_len = rs.lens()[a];
    // How many input points take part: a one-sided inverse reads bins 0 .. n / 2.
    const std::size_t used = std::min(in_len, onesided && inverse ? n / 2 + 1 : n);
    const double sign = inverse ? 1.0 : -1.0;
    const double scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
    // exp(sign 2 pi i m / n) for m = k * j mod n, exact at the multiples of quarter turns.
    std::vector<std::complex<double>> twiddle(n);
    for (std::size_t m = 0; m < n; ++m)
        twiddle[m] = std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n));

    auto lines = xs.lens();
    lines[a] = 1;
    lines.back() = 1;
    auto x_strides = xs.strides();
    auto r_strides = rs.strides();
    x_strides[a] = r_strides[a] = 0;
    x_strides.back() = r_strides.back() = 0;
    const std::size_t xa = xs.strides()[a], xc = xs.strides().back();
    const std::size_t ra = rs.strides()[a], rc = rs.strides().back();
    visit_type(xs.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            const T* x = inputs[0].data_as<const T>();
            T* y = result.data_as<T>();
            std::vector<std::complex<double>> signal(used);
            ops::for_each_broadcast<2>(lines, {x_strides, r_strides}, [&](std::size_t, const std::size_t* off) {
                for (std::size_t j = 0; j < used; ++j) {
                    const T* p = x + off[0] + j * xa;
                    signal[j] = {static_cast<double>(p[0]), complex_in ? static_cast<double>(p[xc]) : 0.0};
                }
                for (std::size_t k = 0; k < out_len; ++k) {
                    std::complex<double> sum = 0;
                    if (onesided && inverse) {
                        // Bins above n / 2 are the conjugates of those below: 2 Re(...) for
                        // the pairs, and only the real parts of bin 0 and (even n) bin n / 2.
                        for (std::size_t j = 0; j < used; ++j) {
                            const double term = (signal[j] * twiddle[(j * k) % n]).real();
                            const bool single = j == 0 || 2 * j == n;
                            sum += single ? (signal[j].real() * twiddle[(j * k) % n].real()) : 2 * term;
                        }
                    } else {
                        for (std::size_t j = 0; j < used; ++j) sum += signal[j] * twiddle[(j * k) % n];
                    }
                    sum *= scale;
                    T* q = y + off[1] + k * ra;
                    q[0] = static_cast<T>(sum.real());
                    if (rs.lens().back() == 2) q[rc] = static_cast<T>(sum.imag());
                }
            });
        }
    });
}

}  // namespace kiln::op
