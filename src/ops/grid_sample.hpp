#pragma once
// grid_sample: samples x [N, C, d1..dr] at the normalized positions of grid
// [N, D1..Dr, r] (ONNX GridSample, torch.nn.functional.grid_sample).
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

enum class grid_sample_mode { linear, nearest, cubic };
inline std::span<const char* const> enum_names(grid_sample_mode) {
    static constexpr const char* names[] = {"linear", "nearest", "cubic"};
    return names;
}

// What a tap outside the input reads: zero, the nearest edge, or the input
// mirrored at its borders.
enum class grid_padding { zeros, border, reflection };
inline std::span<const char* const> enum_names(grid_padding) {
    static constexpr const char* names[] = {"zeros", "border", "reflection"};
    return names;
}

// grid[n, o..., k] in [-1, 1] addresses spatial dim r-1-k (x, y, z order).
// align_corners maps -1 / 1 to the centres of the corner elements instead of
// their outer edges. Linear and cubic (Keys, a = -0.75) weights are separable.
struct grid_sample : op_base {
    grid_sample_mode mode = grid_sample_mode::linear;
    grid_padding padding_mode = grid_padding::zeros;
    bool align_corners = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.mode, "mode");
        f(self.padding_mode, "padding_mode");
        f(self.align_corners, "align_corners");
    }
    std::string name() const { return "grid_sample"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
