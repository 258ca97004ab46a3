#pragma once
// roi_align: ONNX RoiAlign. x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2 in
// input coordinates before spatial_scale), batch_indices [R] -> [R, C,
// output_height, output_width]. Each output bin averages (or takes the max
// over) a grid of bilinearly sampled points.
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

enum class roi_align_mode { avg, max };
inline std::span<const char* const> enum_names(roi_align_mode) {
    static constexpr const char* names[] = {"avg", "max"};
    return names;
}

// half_pixel shifts roi corners by -0.5 pixel; output_half_pixel does not,
// and instead forces every roi to be at least 1x1. sampling_ratio 0 picks
// ceil(roi extent / output extent) samples per bin along each axis. Samples
// more than one pixel outside the input contribute 0. Max mode follows ONNX's
// reference: the max over samples of the largest of the four weighted corners.
struct roi_align : op_base {
    roi_align_mode mode = roi_align_mode::avg;
    bool half_pixel = true;
    std::int64_t output_height = 1;
    std::int64_t output_width = 1;
    std::int64_t sampling_ratio = 0;
    double spatial_scale = 1.0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.mode, "mode");
        f(self.half_pixel, "half_pixel");
        f(self.output_height, "output_height");
        f(self.output_width, "output_width");
        f(self.sampling_ratio, "sampling_ratio");
        f(self.spatial_scale, "spatial_scale");
    }
    std::string name() const { return "roi_align"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
