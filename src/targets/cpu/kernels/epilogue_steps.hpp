#pragma once
// The eltwise steps of an int8 product's epilogue as Kiln gathers them
// before they become oneDNN post-ops, and the one simplification made on
// them: a clip (or ReLU) whose bounds the conversion to the 8-bit result
// reaches anyway is dropped.
//
// Why: in oneDNN's int8 kernels every eltwise post-op is a few more
// instructions per 16 outputs, next to a handful of multiply-adds on a
// narrow layer (MobileNetV2's depthwise and 16-96 channel 1x1 layers at
// batch 8: one clip cost ~5% of the model). A ReLU6 before a uint8 result
// whose scale puts 6 at or past code 255 clips nothing the conversion's
// saturation would not.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <vector>

#include "kiln/dtype.hpp"

namespace kiln::int8_support {

struct eltwise_step {
    dnnl::algorithm kind;
    float alpha = 0, beta = 0;
    float scale = 1;  // oneDNN's factor on the step's result
};

// Removes every relu / clip of `steps` (the last eltwise steps of the chain:
// nothing but the conversion to `result_type` with zero point
// `result_zero_point` follows them) whose bounds the conversion's rounding
// and saturation reach anyway: each later step is monotone (round, relu,
// clip, a linear step with a positive factor), and the result of its lower
// bound is the lowest code, of its upper bound the highest, with margins
// wide enough for float32 arithmetic. Nothing changes for a float result.
void drop_clips_the_saturation_covers(std::vector<eltwise_step>& steps, dtype result_type,
                                      std::int32_t result_zero_point);

}  // namespace kiln::int8_support
