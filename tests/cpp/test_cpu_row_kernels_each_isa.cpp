// The cpu target's softmax, log_softmax and layer_norm row loops, AVX-512
// (softmax_avx512.cpp, layer_norm_avx512.cpp, on a CPU that has it) and AVX2
// (forced with KILN_CPU_ISA=avx2), against ref: row lengths that leave every
// kind of tail for 16 and 8 lanes, rows shorter than one vector, a mean far
// from zero, and layer norm with and without scale and bias.
#include "pass_test_helpers.hpp"
#include "scoped_env.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const std::size_t lengths[] = {1, 3, 8, 15, 16, 17, 31, 33, 100, 773};

std::string algorithm_for(const program& p, const std::string& op) {
    program compiled = p;
    compiled.compile(get_target("cpu"));
    for (const auto& choice : compiled.kernel_choices())
        if (choice.op == op) return choice.algorithm;
    return "none";
}

// `family`_avx512 where the CPU has AVX-512 (else _avx2), then _avx2 forced.
void expect_each_isa_matches_ref(const program& p, const std::string& op, const std::string& family, double tol) {
    {
        const std::string expected = family + (avx512::supported() ? "_avx512" : "_avx2");
        SCOPED_TRACE(expected);
        EXPECT_EQ(algorithm_for(p, op), expected);
        expect_cpu_matches_ref(p, tol);
    }
    {
        scoped_env forced("KILN_CPU_ISA", "avx2");
        SCOPED_TRACE("KILN_CPU_ISA=avx2");
        EXPECT_EQ(algorithm_for(p, op), family + "_avx2");
        expect_cpu_matches_ref(p, tol);
    }
}

program softmax_program(const std::string& name, std::size_t rows, std::size_t length) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({rows, length}));
    m.add_return({m.add_instruction(make_op(name, value_map{{"axis", -1}}), {x})});
    return p;
}

// x + offset normalized over its last dimension, scale and bias constants or absent.
program layer_norm_program(std::size_t rows, std::size_t length, bool affine, float offset) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({rows, length}));
    auto shifted = m.add_instruction(
        make_op("add"), {x, add_float_literal(m, {rows, length}, std::vector<float>(rows * length, offset))});
    std::vector<instruction_ref> inputs{shifted};
    if (affine) {
        inputs.push_back(add_random_literal(m, {length}, 5));
        inputs.push_back(add_random_literal(m, {length}, 6));
    }
    m.add_return({m.add_instruction(make_op("layer_norm", value_map{{"axis", -1}, {"epsilon", 1e-5}}), inputs)});
    return p;
}

}  // namespace

TEST(cpu_row_kernels_each_isa, softmax_and_log_softmax_every_tail) {
    for (const char* name : {"softmax", "log_softmax"})
        for (std::size_t n : lengths) {
            SCOPED_TRACE(std::string(name) + " length " + std::to_string(n));
            expect_each_isa_matches_ref(softmax_program(name, 5, n), name, "softmax", 2e-5);
        }
}

TEST(cpu_row_kernels_each_isa, layer_norm_every_tail_with_and_without_scale_and_bias) {
    for (bool affine : {false, true})
        for (std::size_t n : lengths) {
            if (n == 1) continue;  // a single element normalizes to 0 / sqrt(epsilon): no spread to test
            SCOPED_TRACE("length " + std::to_string(n) + (affine ? " with" : " without") + " scale and bias");
            expect_each_isa_matches_ref(layer_norm_program(7, n, affine, 0.0f), "layer_norm", "layer_norm", 1e-4);
        }
}

TEST(cpu_row_kernels_each_isa, layer_norm_of_rows_far_from_zero) {
    for (std::size_t n : {std::size_t{17}, std::size_t{768}})
        expect_each_isa_matches_ref(layer_norm_program(3, n, true, 1000.0f), "layer_norm", "layer_norm", 1e-3);
}

TEST(cpu_row_kernels_each_isa, a_bad_isa_setting_is_an_error_naming_it) {
    scoped_env bad("KILN_CPU_ISA", "sse9");
    try {
        algorithm_for(softmax_program("softmax", 2, 5), "softmax");
        FAIL() << "compiled with KILN_CPU_ISA=sse9";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("KILN_CPU_ISA must be avx2 or avx512, got 'sse9'"), std::string::npos)
            << e.what();
    }
}
