// The one place that lists the ONNX op families; each family file registers
// its own parse functions.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {
parser_table build_parsers() {
    parser_table table;
    add_elementwise_parsers(table);
    add_activation_parsers(table);
    add_constant_parsers(table);
    add_reduce_parsers(table);
    add_shape_parsers(table);
    add_index_parsers(table);
    add_linalg_parsers(table);
    add_nn_parsers(table);
    add_normalization_parsers(table);
    add_math_parsers(table);
    add_spatial_parsers(table);
    add_conv_transpose_parsers(table);
    add_resize_parsers(table);
    add_gather_scatter_parsers(table);
    add_sequence_gen_parsers(table);
    add_quant_parsers(table);
    add_attention_parsers(table);
    add_transformer_parsers(table);
    add_loss_parsers(table);
    add_einsum_parsers(table);
    add_grid_parsers(table);
    add_cumprod_bitcast_parsers(table);
    add_dft_parsers(table);
    add_recurrent_parsers(table);
    add_image_ops_parsers(table);
    add_control_parsers(table);
    return table;
}
}  // namespace

const parser_table& get_parsers() {
    static const parser_table table = build_parsers();
    return table;
}

}  // namespace kiln::onnx_import
