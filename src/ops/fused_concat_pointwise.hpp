#pragma once
// A concatenation read only by a fused_pointwise, as one op: the pointwise
// program runs over each piece and writes its part of the result, so the
// concatenated tensor is never stored (DenseNet concatenates a block's
// features before every layer only to apply that layer's batch norm + ReLU).
//
// The first `pieces` inputs are concatenated along `axis`; the program reads
// the concatenation as value 0 and the remaining inputs as values 1, 2, ...
// (numbered as in fused_pointwise). Printed:
//   fused_concat_pointwise[axis=1,pieces=3,steps={{"mul", {0, 1}}, {"relu", {4}}}]
#include <cstdint>
#include <string>
#include <vector>

#include "ops/fused_pointwise.hpp"

namespace kiln::op {

struct fused_concat_pointwise : op_base {
    std::int64_t axis = 0;
    std::int64_t pieces = 1;
    std::vector<pointwise_step> steps;
    dtype output_type = dtype::float_type;  // or int8 / uint8
    double output_scale = 1;                // a float32 value, held exactly
    std::int64_t output_zero_point = 0;
    bool channels_last = false;
    std::vector<double> piece_scales;  // float32 values, held exactly
    std::vector<std::int64_t> piece_zero_points;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.pieces, "pieces");
        f(self.steps, "steps");
        f(self.output_type, "output_type");
        f(self.output_scale, "output_scale");
        f(self.output_zero_point, "output_zero_point");
        f(self.channels_last, "channels_last");
        f(self.piece_scales, "piece_scales");
        f(self.piece_zero_points, "piece_zero_points");
    }
    bool quantized() const { return output_type != dtype::float_type; }
    std::string name() const { return "fused_concat_pointwise"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    // The concatenation into a buffer of its own, then the program's reference compute.
    void compute(const argument& result, const std::vector<argument>& inputs) const;

    // The result in standard layout.
    shape standard_result(const std::vector<shape>& inputs) const;
    // Whether piece i (of these inputs) is codes read dequantized; fails on
    // a coded piece without its scale and zero point.
    bool coded_piece(const std::vector<shape>& inputs, std::size_t i) const;
    // The concatenation's shape (float32 where pieces are codes), followed by the program's other inputs.
    std::vector<shape> program_inputs(const std::vector<shape>& inputs) const;
};

}  // namespace kiln::op
