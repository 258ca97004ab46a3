#pragma once
// Registration functions of the ONNX op families, one per parse_*.cpp file.
#include "onnx/onnx_parser.hpp"

namespace kiln::onnx_import {

void add_elementwise_parsers(parser_table& table);  // arithmetic, comparison, logic, math, Cast, Clip, Where
void add_activation_parsers(parser_table& table);   // Relu family built from elementwise ops
void add_constant_parsers(parser_table& table);     // Constant, Shape, Size, ConstantOfShape, Identity
void add_reduce_parsers(parser_table& table);       // Reduce*, ArgMax, ArgMin
void add_shape_parsers(parser_table& table);        // Reshape, Transpose, Flatten, Concat, Squeeze, Slice, Pad, ...
void add_index_parsers(parser_table& table);        // Gather
void add_linalg_parsers(parser_table& table);       // MatMul, Gemm
void add_nn_parsers(parser_table& table);           // Conv, pooling, BatchNormalization, Softmax
void add_normalization_parsers(parser_table& table);  // LayerNormalization, Instance/Group norm, MVN, LpNorm, LRN
void add_math_parsers(parser_table& table);           // trig/hyperbolic, bitwise, Celu, Shrink, Mish, IsNaN, Hardmax
void add_spatial_parsers(parser_table& table);        // DepthToSpace, SpaceToDepth, LpPool, GlobalLpPool
void add_conv_transpose_parsers(parser_table& table);  // ConvTranspose
void add_resize_parsers(parser_table& table);         // Resize, Upsample
void add_gather_scatter_parsers(parser_table& table);  // GatherElements, GatherND, Scatter*
void add_sequence_gen_parsers(parser_table& table);   // Range, EyeLike, OneHot, Trilu, Tile, CumSum, TopK, ...
void add_quant_parsers(parser_table& table);          // (De)QuantizeLinear, QLinear*, *Integer
void add_attention_parsers(parser_table& table);      // Attention
void add_transformer_parsers(parser_table& table);    // RMSNormalization, RotaryEmbedding, Swish, SwiGLU, CausalConvWithState
void add_loss_parsers(parser_table& table);           // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void add_einsum_parsers(parser_table& table);         // Einsum
void add_grid_parsers(parser_table& table);           // GridSample, CenterCropPad
void add_cumprod_bitcast_parsers(parser_table& table);  // CumProd, BitCast
void add_dft_parsers(parser_table& table);            // DFT
void add_recurrent_parsers(parser_table& table);      // RNN, GRU, LSTM
void add_image_ops_parsers(parser_table& table);      // Hann/Hamming/BlackmanWindow, Col2Im, AffineGrid, TensorScatter
void add_control_parsers(parser_table& table);        // If, Loop, Scan

// The IR convert attributes of an ONNX Cast / CastLike to `target` (its saturate and round_mode).
value_map cast_attributes(const node_context& ctx, dtype target);

}  // namespace kiln::onnx_import
