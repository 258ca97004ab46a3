// reduce_sum, reduce_mean, reduce_max and reduce_min of float32 over one
// contiguous run of axes: the input is viewed as [outer, reduced, inner]
// (a CNN's global average pool is [N*C, H*W, 1] plain or [N*C/8, H*W, 8] in
// the blocked layout, [N, H*W, C] channels-last: the input may be packed in
// any order of its dimensions where the reduced ones are adjacent in memory
// and the others keep the result's order). Each output element folds its inputs in the order the
// reference does, in double, so results equal the reference's bit for bit;
// outputs are shared between threads, with no buffer allocated while running.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ops/op_helpers.hpp"
#include "ops/reduce.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"

namespace kiln {

namespace {

// Inputs below this many elements stay on one thread.
constexpr std::size_t parallel_elements = std::size_t{1} << 15;
// Output elements folded together, so that `inner` rows are read in runs.
constexpr std::size_t lanes = 8;

class reduce_kernel final : public cpu_kernel {
public:
    reduce_kernel(op::reduction kind, std::size_t outer, std::size_t reduced, std::size_t inner, int threads)
        : kind_(kind), outer_(outer), reduced_(reduced), inner_(inner), threads_(threads) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const float* x = inputs[0].data_as<float>();
        float* y = result.data_as<float>();
        const std::size_t groups_per_row = (inner_ + lanes - 1) / lanes;
        const auto groups = static_cast<std::ptrdiff_t>(outer_ * groups_per_row);
        const bool parallel = outer_ * reduced_ * inner_ >= parallel_elements;
        const int threads = parallel ? threads_ : 1;
#pragma omp parallel for schedule(static) num_threads(threads)
        for (std::ptrdiff_t g = 0; g < groups; ++g) {
            const std::size_t o = static_cast<std::size_t>(g) / groups_per_row;
            const std::size_t i0 = static_cast<std::size_t>(g) % groups_per_row * lanes;
            const std::size_t width = inner_ - i0 < lanes ? inner_ - i0 : lanes;
            fold(x + o * reduced_ * inner_ + i0, width, y + o * inner_ + i0);
        }
    }

private:
    // y[k] = the reduction over r of x[r * inner + k], for k < width.
    void fold(const float* x, std::size_t width, float* y) const {
        double acc[lanes];
        const bool extreme = kind_ == op::reduction::max || kind_ == op::reduction::min;
        const double start = kind_ == op::reduction::max   ? -std::numeric_limits<double>::infinity()
                             : kind_ == op::reduction::min ? std::numeric_limits<double>::infinity()
                                                           : 0.0;
        for (std::size_t k = 0; k < lanes; ++k) acc[k] = start;
        if (!extreme) {
            for (std::size_t r = 0; r < reduced_; ++r)
                for (std::size_t k = 0; k < width; ++k) acc[k] += static_cast<double>(x[r * inner_ + k]);
        } else {
            const bool want_max = kind_ == op::reduction::max;
            // A NaN wins and then stays, as in the reference.
            for (std::size_t r = 0; r < reduced_; ++r)
                for (std::size_t k = 0; k < width; ++k) {
                    const double v = x[r * inner_ + k], a = acc[k];
                    const bool better = want_max ? v > a : v < a;
                    acc[k] = std::isnan(a) ? a : (std::isnan(v) || better ? v : a);
                }
        }
        for (std::size_t k = 0; k < width; ++k) {
            double v = acc[k];
            if (kind_ == op::reduction::mean) v /= static_cast<double>(reduced_);
            y[k] = static_cast<float>(v);
        }
    }

    op::reduction kind_;
    std::size_t outer_, reduced_, inner_;
    int threads_;
};

std::optional<op::reduction> kind_of(const operation& op, std::vector<std::int64_t>& axes) {
    if (const auto* r = op.get_if<op::reduce_sum>()) {
        axes = r->axes;
        return op::reduction::sum;
    }
    if (const auto* r = op.get_if<op::reduce_mean>()) {
        axes = r->axes;
        return op::reduction::mean;
    }
    if (const auto* r = op.get_if<op::reduce_max>()) {
        axes = r->axes;
        return op::reduction::max;
    }
    if (const auto* r = op.get_if<op::reduce_min>()) {
        axes = r->axes;
        return op::reduction::min;
    }
    return std::nullopt;
}

}  // namespace

std::shared_ptr<const cpu_kernel> make_reduce_kernel(const kernel_request& r) {
    std::vector<std::int64_t> axes;
    const auto kind = kind_of(r.op, axes);
    const shape& x = r.input_shapes[0];
    if (!kind || x.type() != dtype::float_type || !x.packed() || x.broadcasted() || x.elements() == 0 || x.ndim() == 0)
        return nullptr;
    std::vector<bool> reduced(x.ndim(), axes.empty());
    for (auto a : ops::normalize_axes(r.op.name(), axes, x.ndim())) reduced[a] = true;
    // The dimensions in memory order (outermost first), leaving out those of
    // length 1; the kept ones must stay in their logical order, so that the
    // standard result is [outer, inner].
    std::vector<std::size_t> order;
    for (std::size_t d = 0; d < x.ndim(); ++d)
        if (x.lens()[d] != 1) order.push_back(d);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return x.strides()[a] > x.strides()[b]; });
    std::size_t last_kept = 0;
    bool any_kept = false;
    for (auto d : order) {
        if (reduced[d]) continue;
        if (any_kept && d < last_kept) return nullptr;
        last_kept = d;
        any_kept = true;
    }
    // The reduced axes, in memory order, must be one run.
    std::size_t outer = 1, count = 1, inner = 1;
    int phase = 0;  // 0: before the run, 1: in it, 2: after it
    for (auto d : order) {
        const std::size_t len = x.lens()[d];
        if (reduced[d]) {
            if (phase == 2) return nullptr;
            phase = 1;
            count *= len;
        } else if (phase == 0) {
            outer *= len;
        } else {
            phase = 2;
            inner *= len;
        }
    }
    return std::make_shared<reduce_kernel>(*kind, outer, count, inner, r.threads);
}

}  // namespace kiln
