// softmax, log_softmax and layer_norm on the gpu against ref, in float32,
// float16 and bfloat16, over the cases that pick each kernel: contiguous
// rows held by a warp (up to 1024 elements) or a block (up to 8192), 16-byte
// vectorised or scalar (lengths that are not a multiple of the vector, rows
// that start unaligned), and the strided kernels (longer rows, a middle
// axis). Each case prints the kernel that ran.
#include <iostream>

#include "gpu_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

double tolerance_for(dtype type) {
    if (type == dtype::half_type) return 1e-2;
    if (type == dtype::bf16_type) return 3e-2;
    return 2e-5;
}

// x [3, 5, length] (or, with unaligned, a slice [1, length + 1) of [3, 5, length + 2], so
// rows start one element past a 16-byte boundary) as the op's input.
instruction_ref row_input(module& m, dtype type, std::size_t length, bool unaligned) {
    if (!unaligned) return m.add_parameter("x", shape{type, {3, 5, length}});
    auto wide = m.add_parameter("x", shape{type, {3, 5, length + 2}});
    return m.add_instruction(make_op("slice", value_map{{"axes", ints({2})},
                                                        {"starts", ints({1})},
                                                        {"ends", ints({static_cast<std::int64_t>(length + 1)})}}),
                             {wide});
}

std::string label(const std::string& op, dtype type, std::size_t length, bool unaligned) {
    return op + " " + to_string(type) + " length " + std::to_string(length) + (unaligned ? " unaligned" : "");
}

void check(const program& p, const std::string& op, const std::string& what, dtype type) {
    expect_gpu_matches_ref(p, tolerance_for(type), what);
    std::cout << "  " << what << ": " << gpu_algorithm(compiled_for_gpu(p), op) << "\n";
}

const std::vector<std::size_t> lengths{1, 37, 768, 1000, 1024, 1030, 3000, 8192, 9000};

}  // namespace

TEST(gpu_normalization_rows, softmax_and_log_softmax_over_the_last_axis) {
    for (dtype type : {dtype::float_type, dtype::half_type, dtype::bf16_type})
        for (const char* op : {"softmax", "log_softmax"})
            for (std::size_t length : lengths)
                for (bool unaligned : {false, true}) {
                    if (unaligned && length != 768 && length != 37) continue;
                    program p;
                    module& m = *p.get_main_module();
                    auto x = row_input(m, type, length, unaligned);
                    m.add_return({m.add_instruction(make_op(op, value_map{{"axis", -1}}), {x})});
                    check(p, op, label(op, type, length, unaligned), type);
                }
}

TEST(gpu_normalization_rows, softmax_over_a_middle_axis_takes_the_strided_kernel) {
    for (dtype type : {dtype::float_type, dtype::half_type}) {
        program p;
        module& m = *p.get_main_module();
        auto x = m.add_parameter("x", shape{type, {2, 300, 7}});
        m.add_return({m.add_instruction(make_op("softmax", value_map{{"axis", 1}}), {x})});
        check(p, "softmax", "softmax axis 1 " + to_string(type), type);
        EXPECT_EQ(gpu_algorithm(compiled_for_gpu(p), "softmax"), "cuda_softmax");
    }
}

TEST(gpu_normalization_rows, layer_norm_with_and_without_scale_and_bias) {
    for (dtype type : {dtype::float_type, dtype::half_type, dtype::bf16_type})
        for (std::size_t length : lengths)
            for (bool unaligned : {false, true})
                for (int affine = 0; affine < 3; ++affine) {  // x only, x and scale, x scale and bias
                    if (unaligned && length != 768 && length != 37) continue;
                    if (affine < 2 && length != 768) continue;
                    program p;
                    module& m = *p.get_main_module();
                    std::vector<instruction_ref> inputs{row_input(m, type, length, unaligned)};
                    if (affine >= 1) inputs.push_back(m.add_parameter("scale", shape{type, {length}}));
                    if (affine >= 2) inputs.push_back(m.add_parameter("bias", shape{type, {length}}));
                    m.add_return(
                        {m.add_instruction(make_op("layer_norm", value_map{{"axis", -1}, {"epsilon", 1e-5}}), inputs)});
                    check(p, "layer_norm",
                          label("layer_norm", type, length, unaligned) + " inputs " + std::to_string(affine + 1), type);
                    if (!unaligned) {
                        EXPECT_EQ(gpu_algorithm(compiled_for_gpu(p), "layer_norm"),
                                  length <= 8192 ? "cuda_layer_norm_rows" : "cuda_layer_norm");
                    }
                }
}

TEST(gpu_normalization_rows, layer_norm_over_two_axes_and_with_a_broadcast_scale) {
    for (dtype type : {dtype::float_type, dtype::half_type}) {
        // Normalized dims [6, 128] contiguous: one row of 768.
        program p;
        module& m = *p.get_main_module();
        auto x = m.add_parameter("x", shape{type, {2, 6, 128}});
        auto scale = m.add_parameter("scale", shape{type, {6, 128}});
        m.add_return({m.add_instruction(make_op("layer_norm", value_map{{"axis", 1}, {"epsilon", 1e-5}}), {x, scale})});
        check(p, "layer_norm", "layer_norm axes 1-2 " + to_string(type), type);

        // A scale [128] broadcast over [6, 128] is not one run: the strided kernel.
        program q;
        module& n = *q.get_main_module();
        auto y = n.add_parameter("x", shape{type, {2, 6, 128}});
        auto s = n.add_parameter("scale", shape{type, {128}});
        n.add_return({n.add_instruction(make_op("layer_norm", value_map{{"axis", 1}, {"epsilon", 1e-5}}), {y, s})});
        check(q, "layer_norm", "layer_norm broadcast scale " + to_string(type), type);
        EXPECT_EQ(gpu_algorithm(compiled_for_gpu(q), "layer_norm"), "cuda_layer_norm");
    }
}
