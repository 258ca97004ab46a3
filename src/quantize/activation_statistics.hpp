#pragma once
// What calibration remembers of one activation over all samples, in memory
// that does not grow with the number of samples: the running minimum and
// maximum, and a streaming histogram of magnitudes (negative and positive
// values apart) over [0, bound] with a fixed number of bins. When a value
// exceeds the bound, the bound doubles and neighbouring bins merge in pairs,
// so every count stays in a bin that holds its value and the resolution is
// never worse than twice the finest the values allow.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/argument.hpp"
#include "kiln/quantize.hpp"

namespace kiln {

class activation_statistics {
public:
    static constexpr std::size_t default_bins = 2048;

    explicit activation_statistics(std::size_t bins = default_bins);

    // Adds every element of a float tensor; a NaN or infinity is an error.
    void add(const argument& values);

    // From now on also sums the values of each index along `axis` (a
    // convolution input's channels, a dot input's last axis), for the mean
    // input that bias correction weighs the weights' rounding with. Every
    // tensor added must then have the same extent along it.
    void track_channel_means(std::size_t axis);
    // Mean of the values at each index along the tracked axis (empty when
    // none is tracked or nothing was added).
    std::vector<double> channel_means() const;

    std::size_t count() const { return count_; }
    // Values exactly 0 (ReLU's clamped half): counted in positive bin 0 too,
    // but any int8 range with a zero point represents them exactly, so the
    // searches for a clipping threshold leave them out.
    std::size_t zeros() const { return zeros_; }
    double min() const { return min_; }
    double max() const { return max_; }
    // The histogram's upper edge: the bins of each sign cover [0, bound].
    double bound() const { return bound_; }
    std::size_t bins() const { return positive_.size(); }
    // Counts of |x| per bin for x >= 0 and for x < 0.
    const std::vector<std::uint64_t>& positive_counts() const { return positive_; }
    const std::vector<std::uint64_t>& negative_counts() const { return negative_; }

    // The range [lo, hi] to quantize, chosen by `method` (see
    // calibration_method); `percentile` is used by the percentile method.
    std::pair<double, double> range(calibration_method method, double percentile = 99.99) const;

    // Percentile method: the smallest bin edge e with at most `tail` of the
    // values of one sign above it in magnitude.
    double magnitude_cut(const std::vector<std::uint64_t>& counts, double tail) const;
    // Entropy method: the clipping threshold on |x| (see entropy_clip_bins),
    // searched with as many levels as int8 gives [0, threshold]: 256 for
    // values of one sign (ReLU outputs), 128 for values of both.
    double entropy_threshold() const;
    // MSE method: the range [lo, hi] whose int8 round trip has the least
    // squared error over the histogram (see mse_clip_bins).
    std::pair<double, double> mse_range() const;

private:
    template <class T>
    void add_values(const T* data, std::size_t n);
    template <class T>
    void add_channel_sums(const T* data, const std::vector<std::size_t>& lens);
    void grow_to(double magnitude);

    double min_;
    double max_;
    double bound_ = 0;
    std::size_t count_ = 0;
    std::size_t zeros_ = 0;
    bool channels_tracked_ = false;
    std::size_t channel_axis_ = 0;
    std::size_t channel_count_ = 0;  // values added per channel
    std::vector<double> channel_sums_;
    std::vector<std::uint64_t> positive_;
    std::vector<std::uint64_t> negative_;
};

// TensorRT's entropy calibration on a magnitude histogram: for each
// candidate clip of the first i bins (i from `levels` to all), the
// reference distribution P is those bins with the clipped tail's count
// added to the last, and Q is the same bins (without the tail) merged into
// `levels` groups and spread evenly over each group's non-empty bins. Both
// are smoothed (empty bins get 1e-4 taken from the others) and the i whose
// KL(P || Q) is smallest wins; returns that bin index i (the threshold is
// (i + 0.5) bin widths).
std::size_t entropy_clip_bins(const std::vector<std::uint64_t>& magnitudes, std::size_t levels = 128);

}  // namespace kiln
