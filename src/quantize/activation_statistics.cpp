#include "quantize/activation_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quantize/mse_clip_bins.hpp"

namespace kiln {

activation_statistics::activation_statistics(std::size_t bins)
    : min_(std::numeric_limits<double>::infinity()),
      max_(-std::numeric_limits<double>::infinity()),
      positive_(bins, 0),
      negative_(bins, 0) {
    if (bins < 2 || (bins & (bins - 1)) != 0) fail("activation_statistics: the bin count must be a power of two >= 2");
}

void activation_statistics::add(const argument& values) {
    const argument standard = values.get_shape().standard() ? values : values.contiguous();
    const std::size_t n = standard.get_shape().elements();
    bool handled = false;
    visit_type(standard.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            add_values(standard.data_as<const T>(), n);
            if (channels_tracked_) add_channel_sums(standard.data_as<const T>(), standard.get_shape().lens());
            handled = true;
        }
    });
    if (!handled)
        fail(error_kind::type_error,
             "calibration: expected a float tensor, got " + to_string(standard.get_shape().type()));
}

template <class T>
void activation_statistics::add_values(const T* data, std::size_t n) {
    if (n == 0) return;
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (std::size_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(static_cast<float>(data[i]));
        if (!std::isfinite(v))
            fail("calibration: the value " + std::to_string(v) + " at element " + std::to_string(i) + " is not finite");
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    min_ = std::min(min_, lo);
    max_ = std::max(max_, hi);
    count_ += n;
    grow_to(std::max(std::fabs(lo), std::fabs(hi)));
    const std::size_t last = positive_.size() - 1;
    // bound_ is 0 only while every value seen is 0: those all go to bin 0.
    const double per_unit = bound_ > 0 ? static_cast<double>(positive_.size()) / bound_ : 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(static_cast<float>(data[i]));
        const std::size_t bin = std::min(static_cast<std::size_t>(std::fabs(v) * per_unit), last);
        ++(v < 0 ? negative_ : positive_)[bin];
        zeros_ += v == 0;
    }
}

void activation_statistics::track_channel_means(std::size_t axis) {
    channels_tracked_ = true;
    channel_axis_ = axis;
}

template <class T>
void activation_statistics::add_channel_sums(const T* data, const std::vector<std::size_t>& lens) {
    if (channel_axis_ >= lens.size())
        fail("calibration: the value has " + std::to_string(lens.size()) + " dims; channel means need axis " +
             std::to_string(channel_axis_));
    const std::size_t channels = lens[channel_axis_];
    if (channel_sums_.empty()) channel_sums_.assign(channels, 0);
    if (channel_sums_.size() != channels)
        fail("calibration: the value has " + std::to_string(channels) + " channels along axis " +
             std::to_string(channel_axis_) + ", earlier ones " + std::to_string(channel_sums_.size()));
    std::size_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < channel_axis_; ++d) outer *= lens[d];
    for (std::size_t d = channel_axis_ + 1; d < lens.size(); ++d) inner *= lens[d];
    for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t c = 0; c < channels; ++c) {
            const T* run = data + (o * channels + c) * inner;
            double sum = 0;
            for (std::size_t i = 0; i < inner; ++i) sum += static_cast<double>(static_cast<float>(run[i]));
            channel_sums_[c] += sum;
        }
    channel_count_ += outer * inner;
}

std::vector<double> activation_statistics::channel_means() const {
    std::vector<double> means(channel_sums_.size());
    for (std::size_t c = 0; c < means.size(); ++c) means[c] = channel_sums_[c] / static_cast<double>(channel_count_);
    return means;
}

// Doubles the bound until it holds `magnitude`, merging bins 2k and 2k + 1
// into bin k at each doubling.
void activation_statistics::grow_to(double magnitude) {
    if (bound_ == 0) {
        bound_ = magnitude;  // zeros seen so far sit in bin 0, right for any bound
        return;
    }
    const std::size_t bins = positive_.size();
    std::size_t doublings = 0;
    double bound = bound_;
    while (bound < magnitude) {
        bound *= 2;
        ++doublings;
    }
    if (doublings == 0) return;
    bound_ = bound;
    for (auto* counts : {&positive_, &negative_}) {
        std::vector<std::uint64_t> merged(bins, 0);
        const std::size_t shift = std::min<std::size_t>(doublings, 63);
        for (std::size_t b = 0; b < bins; ++b) merged[shift >= 63 ? 0 : (b >> shift)] += (*counts)[b];
        *counts = std::move(merged);
    }
}

double activation_statistics::magnitude_cut(const std::vector<std::uint64_t>& counts, double tail) const {
    const double width = bound_ / static_cast<double>(counts.size());
    double above = 0;
    for (std::size_t b = counts.size(); b-- > 0;) {
        above += static_cast<double>(counts[b]);
        if (above > tail) return static_cast<double>(b + 1) * width;
    }
    return 0;  // at most `tail` values of this sign: cut them all
}

double activation_statistics::entropy_threshold() const {
    std::vector<std::uint64_t> magnitudes(positive_.size());
    for (std::size_t b = 0; b < magnitudes.size(); ++b) magnitudes[b] = positive_[b] + negative_[b];
    // Without this, ReLU's zeros (often half the values) make bin 0 a spike
    // that every merge of bin 0 with its neighbours spreads out, so the
    // search always kept the fewest bins: every ReLU output of ResNet-50
    // clipped to an eighth of its range, 4 dB at the output.
    magnitudes[0] -= zeros_;
    const double width = bound_ / static_cast<double>(magnitudes.size());
    // The int8 levels [0, threshold] gets: all 256 when the values have one
    // sign (the zero point sits at the end), half when they have both.
    const bool one_sided = min_ >= 0 || max_ <= 0;
    const std::size_t clip = entropy_clip_bins(magnitudes, one_sided ? 256 : 128);
    return std::min((static_cast<double>(clip) + 0.5) * width, std::max(std::fabs(min_), std::fabs(max_)));
}

std::pair<double, double> activation_statistics::range(calibration_method method, double percentile) const {
    if (count_ == 0) fail("calibration: no values were seen");
    switch (method) {
        case calibration_method::max:
            return {min_, max_};
        case calibration_method::percentile: {
            if (!(percentile > 50 && percentile <= 100))
                fail("calibration: percentile must be above 50 and at most 100, got " + std::to_string(percentile));
            const double tail = (100.0 - percentile) / 200.0 * static_cast<double>(count_);
            return {std::max(min_, -magnitude_cut(negative_, tail)), std::min(max_, magnitude_cut(positive_, tail))};
        }
        case calibration_method::entropy: {
            const double t = entropy_threshold();
            return {std::max(min_, -t), std::min(max_, t)};
        }
        case calibration_method::mse:
            return mse_range();
    }
    fail("calibration: unknown method");
}

std::pair<double, double> activation_statistics::mse_range() const {
    if (bound_ == 0) return {min_, max_};  // only zeros
    std::vector<std::uint64_t> positive = positive_;
    positive[0] -= zeros_;
    const auto [negative_bins, positive_bins] = mse_clip_bins(negative_, positive, 255);
    const double width = bound_ / static_cast<double>(positive_.size());
    return {std::max(min_, -static_cast<double>(negative_bins) * width),
            std::min(max_, static_cast<double>(positive_bins) * width)};
}

namespace {

// Bins [begin, end) of group j when `n` bins merge into `levels` groups: each
// takes n / levels bins and the last also the remainder.
std::pair<std::size_t, std::size_t> group_bins(std::size_t j, std::size_t n, std::size_t levels) {
    const std::size_t per_group = n / levels;
    const std::size_t begin = j * per_group;
    return {begin, j + 1 == levels ? n : begin + per_group};
}

// Empty bins get `eps`, taken evenly from the others, so the divergence stays finite.
void smooth(std::vector<double>& counts) {
    constexpr double eps = 1e-4;
    std::size_t zeros = 0;
    for (double c : counts) zeros += c == 0;
    const std::size_t nonzeros = counts.size() - zeros;
    if (nonzeros == 0) return;
    const double taken = eps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
    for (double& c : counts) c = c == 0 ? eps : c - taken;
}

// KL(p || q) of two unnormalized distributions over the same bins.
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
    double p_sum = 0, q_sum = 0;
    for (std::size_t b = 0; b < p.size(); ++b) {
        p_sum += p[b];
        q_sum += q[b];
    }
    double kl = 0;
    for (std::size_t b = 0; b < p.size(); ++b) {
        if (p[b] <= 0) continue;
        const double pn = p[b] / p_sum;
        const double qn = q[b] / q_sum;
        kl += qn > 0 ? pn * std::log(pn / qn) : std::numeric_limits<double>::infinity();
    }
    return kl;
}

}  // namespace

std::size_t entropy_clip_bins(const std::vector<std::uint64_t>& magnitudes, std::size_t levels) {
    const std::size_t bins = magnitudes.size();
    if (bins <= levels) return bins;
    std::vector<double> tail_sums(bins + 1, 0);  // tail_sums[i] = count in bins i..
    for (std::size_t b = bins; b-- > 0;) tail_sums[b] = tail_sums[b + 1] + static_cast<double>(magnitudes[b]);
    std::size_t best = bins;
    double best_kl = std::numeric_limits<double>::infinity();
    std::vector<double> p, q;
    for (std::size_t i = levels; i <= bins; ++i) {
        p.assign(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(i));
        p[i - 1] += tail_sums[i];
        q.assign(i, 0);
        for (std::size_t j = 0; j < levels; ++j) {
            auto [begin, end] = group_bins(j, i, levels);
            double total = 0;
            std::size_t filled = 0;
            for (std::size_t b = begin; b < end; ++b) {
                total += static_cast<double>(magnitudes[b]);
                filled += p[b] != 0;
            }
            if (filled == 0) continue;
            for (std::size_t b = begin; b < end; ++b)
                if (p[b] != 0) q[b] = total / static_cast<double>(filled);
        }
        smooth(p);
        smooth(q);
        const double kl = kl_divergence(p, q);
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
    }
    return best;
}

}  // namespace kiln
