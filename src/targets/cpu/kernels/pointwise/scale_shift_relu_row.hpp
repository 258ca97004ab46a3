#pragma once
// What one row of DenseNet's pre-activation batch norm + ReLU + quantize
// reads and writes (scale_shift_relu_codes_avx2.hpp and _avx512.hpp): plain
// data, shared by the portable kernel and both ISAs' loops.

namespace kiln {

enum class row_codes : int { float32, int8, uint8 };

struct scale_shift_relu_row {
    row_codes input = row_codes::float32;
    float input_scale = 1, input_zero_point = 0;  // coded inputs only
    row_codes output = row_codes::uint8;          // int8 or uint8
    float output_scale = 1, output_zero_point = 0;
};

}  // namespace kiln
