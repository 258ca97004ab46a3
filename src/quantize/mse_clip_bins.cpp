#include "quantize/mse_clip_bins.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {

namespace {

// One sign's histogram as running sums, so that a candidate's error on this
// side costs a few operations whatever the bin count.
class side_error {
public:
    explicit side_error(const std::vector<std::uint64_t>& counts) {
        used_ = counts.size();
        while (used_ > 0 && counts[used_ - 1] == 0) --used_;
        below_count_.assign(used_ + 1, 0);
        below_square_.assign(used_ + 1, 0);
        for (std::size_t b = 0; b < used_; ++b) {
            const double c = static_cast<double>(counts[b]), m = static_cast<double>(b) + 0.5;
            below_count_[b + 1] = below_count_[b] + c;
            below_square_[b + 1] = below_square_[b] + c * m * m;
        }
        above_count_.assign(used_ + 1, 0);
        above_first_.assign(used_ + 1, 0);
        above_square_.assign(used_ + 1, 0);
        for (std::size_t b = used_; b-- > 0;) {
            const double c = static_cast<double>(counts[b]), m = static_cast<double>(b) + 0.5;
            above_count_[b] = above_count_[b + 1] + c;
            above_first_[b] = above_first_[b + 1] + c * m;
            above_square_[b] = above_square_[b + 1] + c * m * m;
        }
    }

    // Bins up to the last one holding a value: keeping more changes nothing.
    std::size_t used() const { return used_; }

    // Error of this side's values when its end is at `end` bins (<= used())
    // and the grid has steps of `step` bin widths.
    double error(std::size_t end, double step) const {
        const double e = static_cast<double>(end);
        const double clipped = above_square_[end] - 2 * e * above_first_[end] + e * e * above_count_[end];
        // Bins whose centre lies within half a step of 0 round to 0.
        const double half = step / 2 - 0.5;
        const std::size_t to_zero = half <= 0 ? 0 : std::min(end, static_cast<std::size_t>(std::ceil(half)));
        const double rounded_to_zero = below_square_[to_zero] + below_count_[to_zero] / 12;
        const double rounded = (below_count_[end] - below_count_[to_zero]) * step * step / 12;
        return clipped + rounded_to_zero + rounded;
    }

private:
    std::size_t used_ = 0;
    std::vector<double> below_count_, below_square_;                // over bins [0, k)
    std::vector<double> above_count_, above_first_, above_square_;  // over bins [k, used)
};

}  // namespace

std::pair<std::size_t, std::size_t> mse_clip_bins(const std::vector<std::uint64_t>& negative,
                                                  const std::vector<std::uint64_t>& positive, std::size_t steps) {
    const side_error below(negative), above(positive);
    std::pair<std::size_t, std::size_t> best{below.used(), above.used()};
    double best_error = std::numeric_limits<double>::infinity();
    for (std::size_t a = below.used() + 1; a-- > 0;) {
        for (std::size_t b = above.used() + 1; b-- > 0;) {
            if (a + b == 0) continue;
            const double step = static_cast<double>(a + b) / static_cast<double>(steps);
            const double err = below.error(a, step) + above.error(b, step);
            if (err < best_error) {
                best_error = err;
                best = {a, b};
            }
        }
    }
    return best;
}

}  // namespace kiln
