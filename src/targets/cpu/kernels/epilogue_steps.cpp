#include "targets/cpu/kernels/epilogue_steps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace kiln::int8_support {

namespace {

using alg = dnnl::algorithm;

// A closed interval that holds the float32 value the kernel computes.
struct bracket {
    double low, high;
};

// Float32 arithmetic drifts by a few ulps from the exact value: widen by far more.
bracket widened(bracket b) {
    auto slack = [](double v) { return 1e-5 * (1 + std::abs(v)); };
    return {b.low - slack(b.low), b.high + slack(b.high)};
}

// The step applied to every value of `b`, when the step is monotone
// non-decreasing (so the ends of the interval map to the ends of the result).
std::optional<bracket> through(const eltwise_step& st, bracket b) {
    if (!(st.scale > 0)) return std::nullopt;
    switch (st.kind) {
    case alg::eltwise_relu:
        if (st.alpha != 0) return std::nullopt;  // leaky: still monotone, but never a clip worth dropping through
        b = {std::max(0.0, b.low), std::max(0.0, b.high)};
        break;
    case alg::eltwise_clip:
        b = {std::clamp<double>(b.low, st.alpha, st.beta), std::clamp<double>(b.high, st.alpha, st.beta)};
        break;
    case alg::eltwise_round:
        // Half to even: at least ceil(low - 1/2), at most floor(high + 1/2).
        b = {std::ceil(b.low - 0.5), std::floor(b.high + 0.5)};
        break;
    case alg::eltwise_linear:
        if (!(st.alpha > 0)) return std::nullopt;
        b = widened({st.alpha * b.low + st.beta, st.alpha * b.high + st.beta});
        break;
    default: return std::nullopt;
    }
    return widened({st.scale * b.low, st.scale * b.high});
}

// The codes the steps after `first` and the conversion give for a value in
// `b`: rounded half to even, plus the zero point, saturated. Nothing when
// a later step is not monotone.
std::optional<std::pair<double, double>> codes_of(const std::vector<eltwise_step>& steps, std::size_t first, bracket b,
                                                  double code_low, double code_high, double zero_point) {
    for (std::size_t k = first; k < steps.size(); ++k) {
        const auto next = through(steps[k], b);
        if (!next) return std::nullopt;
        b = *next;
    }
    auto saturate = [&](double c) { return std::clamp(c + zero_point, code_low, code_high); };
    return std::pair{saturate(std::ceil(b.low - 0.5)), saturate(std::floor(b.high + 0.5))};
}

// Whether the step's bounds change no code: its lower bound (times its
// factor) ends as the lowest code whatever rounding does, its upper bound
// as the highest.
bool saturation_covers(const std::vector<eltwise_step>& steps, std::size_t i, double code_low, double code_high,
                       double zero_point) {
    const eltwise_step& st = steps[i];
    if (!(st.scale > 0)) return false;
    double low = 0, high = std::numeric_limits<double>::infinity();
    if (st.kind == alg::eltwise_clip) {
        low = st.alpha;
        high = st.beta;
    } else if (st.kind != alg::eltwise_relu || st.alpha != 0) {
        return false;
    }
    const auto below = codes_of(steps, i + 1, widened({st.scale * low, st.scale * low}), code_low, code_high, zero_point);
    if (!below || below->second != code_low) return false;
    if (std::isinf(high)) return true;
    const auto above = codes_of(steps, i + 1, widened({st.scale * high, st.scale * high}), code_low, code_high, zero_point);
    return above && above->first == code_high;
}

}  // namespace

void drop_clips_the_saturation_covers(std::vector<eltwise_step>& steps, dtype result_type,
                                      std::int32_t result_zero_point) {
    if (result_type != dtype::uint8_type && result_type != dtype::int8_type) return;
    const double code_low = result_type == dtype::uint8_type ? 0 : -128;
    const double code_high = result_type == dtype::uint8_type ? 255 : 127;
    // From the last step back: a clip dropped leaves the same function of
    // the value for the steps before it to be judged against.
    for (std::size_t i = steps.size(); i-- > 0;)
        if (saturation_covers(steps, i, code_low, code_high, result_zero_point)) steps.erase(steps.begin() + i);
}

}  // namespace kiln::int8_support
