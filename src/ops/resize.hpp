#pragma once
// Resizing by nearest, linear or cubic interpolation with ONNX Resize
// semantics. The importer resolves scales / sizes / axes into one output
// extent and one scale per dimension.
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

enum class resize_mode { nearest, linear, cubic };
inline std::span<const char* const> enum_names(resize_mode) {
    static constexpr const char* names[] = {"nearest", "linear", "cubic"};
    return names;
}

// How an output coordinate maps back to an input coordinate (ONNX names).
enum class resize_coordinates {
    half_pixel,
    half_pixel_symmetric,
    pytorch_half_pixel,
    align_corners,
    asymmetric,
    tf_crop_and_resize
};
inline std::span<const char* const> enum_names(resize_coordinates) {
    static constexpr const char* names[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                            "align_corners", "asymmetric",           "tf_crop_and_resize"};
    return names;
}

// How nearest mode rounds a fractional input coordinate.
enum class resize_rounding { round_prefer_floor, round_prefer_ceil, floor, ceil };
inline std::span<const char* const> enum_names(resize_rounding) {
    static constexpr const char* names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    return names;
}

// x of any rank -> out_lens (one extent per dim). scales: one per dim, used
// by the coordinate mapping (empty: out_lens / input lens). Linear and cubic
// interpolate separably along every dim, reading clamped (edge) neighbours;
// exclude_outside instead drops cubic taps outside the input and renormalizes.
// roi: [starts..., ends...] as fractions of each dim, for tf_crop_and_resize,
// which writes extrapolation_value where the mapped coordinate leaves the input.
// antialias (linear and cubic): when a dim shrinks (scale < 1) the filter is
// stretched by 1 / scale, so more input taps contribute, and its weights are
// normalized to sum to 1.
struct resize : op_base {
    std::vector<std::int64_t> out_lens;
    std::vector<double> scales;
    resize_mode mode = resize_mode::nearest;
    resize_coordinates coordinate_transformation_mode = resize_coordinates::half_pixel;
    resize_rounding nearest_mode = resize_rounding::round_prefer_floor;
    double cubic_coeff_a = -0.75;
    bool exclude_outside = false;
    bool antialias = false;
    double extrapolation_value = 0.0;
    std::vector<double> roi;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.out_lens, "out_lens");
        f(self.scales, "scales");
        f(self.mode, "mode");
        f(self.coordinate_transformation_mode, "coordinate_transformation_mode");
        f(self.nearest_mode, "nearest_mode");
        f(self.cubic_coeff_a, "cubic_coeff_a");
        f(self.exclude_outside, "exclude_outside");
        f(self.antialias, "antialias");
        f(self.extrapolation_value, "extrapolation_value");
        f(self.roi, "roi");
    }
    std::string name() const { return "resize"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
