// An int8 product's epilogue drops a clip (or ReLU) whose bounds the
// conversion to the 8-bit result reaches anyway (kernels/epilogue_steps.hpp):
// which clips go, which stay, and the post-ops oneDNN gets for the two
// ReLU6 layers of MobileNetV2 (kiln.quantize_int8's, and an ONNX Runtime QDQ
// file's with the rounding of the convolution's own quantize).
#include <gtest/gtest.h>

#include <vector>

#include "ops/fused_quantized_linalg.hpp"
#include "targets/cpu/kernels/epilogue_steps.hpp"
#include "targets/cpu/kernels/int8_support.hpp"

using namespace kiln;
using kiln::int8_support::eltwise_step;
using alg = dnnl::algorithm;

namespace {

std::vector<alg> kinds_after_dropping(std::vector<eltwise_step> steps, dtype result, std::int32_t zero_point) {
    int8_support::drop_clips_the_saturation_covers(steps, result, zero_point);
    std::vector<alg> kinds;
    for (const auto& st : steps) kinds.push_back(st.kind);
    return kinds;
}

std::vector<alg> post_op_kinds(const dnnl::primitive_attr& attr) {
    const dnnl::post_ops ops = attr.get_post_ops();
    std::vector<alg> kinds;
    for (int i = 0; i < ops.len(); ++i) {
        if (ops.kind(i) != dnnl::primitive::kind::eltwise) {
            kinds.push_back(alg::undef);
            continue;
        }
        float scale = 0, alpha = 0, beta = 0;
        alg kind{};
        ops.get_params_eltwise(i, scale, kind, alpha, beta);
        kinds.push_back(kind);
    }
    return kinds;
}

}  // namespace

TEST(EpilogueSaturatedClips, Relu6BeforeUint8WhoseTopCodeIsBelowSixIsDropped) {
    // In units of the output scale 0.0219: 6 / 0.0219 = 274 > 255, and 0 is code 0.
    EXPECT_TRUE(kinds_after_dropping({{alg::eltwise_clip, 0, 6 / 0.0219f}}, dtype::uint8_type, 0).empty());
    // A ReLU before uint8 with zero point 0 clips nothing the saturation would not.
    EXPECT_TRUE(kinds_after_dropping({{alg::eltwise_relu}}, dtype::uint8_type, 0).empty());
}

TEST(EpilogueSaturatedClips, ClipsThatCutInsideTheCodesStay) {
    // 6 / 0.05 = 120: codes 121-255 are reachable without the clip.
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_clip, 0, 120}}, dtype::uint8_type, 0),
              std::vector<alg>{alg::eltwise_clip});
    // Upper bound 254.5 rounds (half to even) to 254, not the top code.
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_clip, 0, 254.5f}}, dtype::uint8_type, 0),
              std::vector<alg>{alg::eltwise_clip});
    // int8: a ReLU's 0 is code 0, above the lowest code -128.
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_relu}}, dtype::int8_type, 0), std::vector<alg>{alg::eltwise_relu});
    // uint8 with zero point 10: 0 is code 10.
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_relu}}, dtype::uint8_type, 10), std::vector<alg>{alg::eltwise_relu});
    // A float result has no saturation.
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_relu}}, dtype::float_type, 0), std::vector<alg>{alg::eltwise_relu});
}

TEST(EpilogueSaturatedClips, OnlyThroughMonotoneLaterSteps) {
    // Through a positive linear step: 140 * 1.837 = 257 >= 255.
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_clip, 0, 140}, {alg::eltwise_linear, 1.837f}}, dtype::uint8_type, 0),
              std::vector<alg>{alg::eltwise_linear});
    // A negative factor turns the bounds around: kept.
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_clip, -200, 0}, {alg::eltwise_linear, -1.5f}}, dtype::uint8_type, 0),
              (std::vector<alg>{alg::eltwise_clip, alg::eltwise_linear}));
    // GELU is not monotone: whatever the bounds, kept.
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_clip, 0, 1000}, {alg::eltwise_gelu_erf}}, dtype::uint8_type, 0),
              (std::vector<alg>{alg::eltwise_clip, alg::eltwise_gelu_erf}));
    // A later clip that keeps the value off the top code keeps an earlier wide clip too (judged through it).
    EXPECT_EQ(kinds_after_dropping({{alg::eltwise_clip, 0, 1000}, {alg::eltwise_clip, -5, 100}}, dtype::uint8_type, 0),
              (std::vector<alg>{alg::eltwise_clip, alg::eltwise_clip}));
}

TEST(EpilogueSaturatedClips, QuantizeInt8Relu6LayerHasNoEltwisePostOp) {
    // kiln.quantize_int8's MobileNetV2 layer: convolution, ReLU6, uint8 result of scale 0.0219 (6 is past code 255).
    op::requantize_epilogue e;
    e.has_bias = true;
    e.activation.append(op::post_op_kind::clip, 0, 6);
    e.output_type = dtype::uint8_type;
    e.output_scale = 0.0219000205;
    const auto attr = int8_support::epilogue_attr(e, std::vector<float>(4, 1e-3f), 1, 0, {});
    ASSERT_TRUE(attr.has_value());
    EXPECT_TRUE(post_op_kinds(*attr).empty());
    // A ReLU6 that cuts inside the codes (scale 0.05: 6 is code 120) stays.
    e.output_scale = 0.05;
    const auto kept = int8_support::epilogue_attr(e, std::vector<float>(4, 1e-3f), 1, 0, {});
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(post_op_kinds(*kept), std::vector<alg>{alg::eltwise_clip});
}

TEST(EpilogueSaturatedClips, QdqRelu6LayerKeepsOnlyTheRoundingAndTheRescale) {
    // ONNX Runtime's QDQ MobileNetV2 layer: Conv -> Q(0.0402, -12) -> DQ -> Clip(0, 6) -> Q(0.0219, 0 as uint8).
    // The rounding's saturation [-116, 139] merged with the ReLU6 is [0, 139] codes, 139 * 0.0402 / 0.0219 = 255.4.
    op::requantize_epilogue e;
    e.has_bias = true;
    e.round_type = dtype::int8_type;
    e.round_scale = 0.0402336866;
    e.round_zero_point = -12;
    e.after_residual.append(op::post_op_kind::clip, 0, 6);
    e.output_type = dtype::uint8_type;
    e.output_scale = 0.0219000205;
    const auto attr = int8_support::epilogue_attr(e, std::vector<float>(4, 1e-3f), 1, 0, {});
    ASSERT_TRUE(attr.has_value());
    EXPECT_EQ(post_op_kinds(*attr), (std::vector<alg>{alg::eltwise_round, alg::eltwise_linear}));
    // A rounding zero point of 20 puts the codes' top at 107 * 0.0402 = 4.3: 196 as output codes, so the clip stays.
    e.round_zero_point = 20;
    const auto kept = int8_support::epilogue_attr(e, std::vector<float>(4, 1e-3f), 1, 0, {});
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(post_op_kinds(*kept), (std::vector<alg>{alg::eltwise_round, alg::eltwise_clip, alg::eltwise_linear}));
}
