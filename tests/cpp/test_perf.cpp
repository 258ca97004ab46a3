#include <gtest/gtest.h>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {
program two_op_program(const std::string& target_name) {
    program p;
    module* m = p.get_main_module();
    shape s{dtype::float_type, {64, 64}};
    auto x = m->add_parameter("x", s);
    auto d = m->add_instruction(make_op("dot"), {x, x});
    // softmax: an op the cpu pipeline does not fold into the dot.
    m->add_return({m->add_instruction(make_op("softmax"), {d})});
    p.compile(get_target(target_name));
    return p;
}
}  // namespace

TEST(perf, report_lists_every_instruction_and_consistent_totals) {
    for (const auto* t : {"ref", "cpu"}) {
        program p = two_op_program(t);
        parameter_map inputs{{"x", generate_argument(shape{dtype::float_type, {64, 64}}, 1)}};
        perf_report r = measure_performance(p, inputs, 5, 1, 64);  // a batch of 64 rows
        ASSERT_EQ(r.instructions.size(), 2u) << t;
        // cpu runs every float32 dot as fused_dot (oneDNN matmul).
        EXPECT_EQ(r.instructions[0].op, std::string(t) == "cpu" ? "fused_dot" : "dot");
        EXPECT_EQ(r.instructions[1].op, "softmax");
        EXPECT_EQ(r.ops.size(), 2u);
        double share = 0;
        for (const auto& i : r.instructions) share += i.share;
        EXPECT_NEAR(share, 1.0, 1e-9);
        EXPECT_LE(r.min_ms, r.median_ms);
        EXPECT_LE(r.median_ms, r.p90_ms);
        EXPECT_LE(r.p90_ms, r.p99_ms);
        EXPECT_LE(r.p99_ms, r.max_ms);
        EXPECT_NEAR(r.rate, 64 * 1e3 / r.mean_ms, 1e-6 * r.rate);
        EXPECT_LE(r.kernel_ms, r.mean_ms);
        std::string text = format_perf_report(r);
        EXPECT_NE(text.find("Summary by op kind"), std::string::npos);
        EXPECT_NE(text.find("p99"), std::string::npos);
    }
}

TEST(perf, needs_a_compiled_program_and_runs) {
    program p;
    module* m = p.get_main_module();
    m->add_return({m->add_parameter("x", shape{dtype::float_type, {2}})});
    EXPECT_THROW(measure_performance(p, {}, 3), error);
    program c = two_op_program("cpu");
    EXPECT_THROW(measure_performance(c, {{"x", argument(shape{dtype::float_type, {64, 64}})}}, 0), error);
}

TEST(perf, a_batch_must_be_what_the_program_computes) {
    program p = two_op_program("cpu");
    parameter_map inputs{{"x", generate_argument(shape{dtype::float_type, {64, 64}}, 1)}};
    // No input has a leading dimension of 8: a rate for 8 inferences per run would be made up.
    try {
        measure_performance(p, inputs, 1, 0, 8);
        FAIL() << "expected an error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("batch 8 does not match the program"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("x {64, 64}"), std::string::npos) << e.what();
    }
    EXPECT_THROW(measure_performance(p, inputs, 1, 0, 0), error);
    EXPECT_EQ(measure_performance(p, inputs, 1, 0, 1).batch, 1u);
}
