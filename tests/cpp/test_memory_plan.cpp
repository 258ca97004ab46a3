#include <gtest/gtest.h>

#include <random>

#include "kiln/kiln.hpp"
#include "runtime/memory_planner.hpp"
#include "targets/cpu/cpu_target.hpp"

using namespace kiln;

TEST(memory_plan, disjoint_lifetimes_share_memory) {
    std::vector<buffer_lifetime> buffers = {{1000, 0, 1}, {1000, 2, 3}, {1000, 4, 5}};
    memory_plan plan = plan_memory(buffers);
    EXPECT_TRUE(plan_is_valid(buffers, plan));
    EXPECT_EQ(plan.arena_bytes, 1024u);  // one 64-byte aligned slot reused three times
}

TEST(memory_plan, overlapping_lifetimes_never_overlap_in_memory) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<buffer_lifetime> buffers;
        std::size_t n = 1 + rng() % 40;
        std::size_t total = 0;
        for (std::size_t i = 0; i < n; ++i) {
            std::size_t first = rng() % 30;
            std::size_t bytes = 1 + rng() % 5000;
            buffers.push_back({bytes, first, first + rng() % 10});
            total += (bytes + 63) / 64 * 64;
        }
        memory_plan plan = plan_memory(buffers);
        ASSERT_TRUE(plan_is_valid(buffers, plan)) << "trial " << trial;
        EXPECT_LE(plan.arena_bytes, total);
        for (auto off : plan.offsets) EXPECT_EQ(off % 64, 0u);
    }
}

TEST(memory_plan, validity_check_detects_overlap) {
    std::vector<buffer_lifetime> buffers = {{100, 0, 2}, {100, 1, 3}};
    memory_plan bad{{0, 64}, 192};
    EXPECT_FALSE(plan_is_valid(buffers, bad));
}

// A chain of 10 ops on a 1 MiB tensor: each intermediate dies right after its
// user runs, so the cpu target needs two buffers, not nine.
TEST(memory_plan, cpu_program_reports_planned_peak_below_naive_sum) {
    program p;
    module* m = p.get_main_module();
    shape s{dtype::float_type, {256, 1024}};
    auto v = m->add_parameter("x", s);
    for (int i = 0; i < 10; ++i) v = m->add_instruction(make_op(i < 9 ? "neg" : "relu"), {v});
    m->add_return({v});
    // simplify_algebra would cancel the negations and fuse_pointwise would
    // make them one instruction; either leaves nothing to plan.
    compile_options options;
    options.disabled_passes = {"simplify_algebra", "fuse_pointwise"};
    p.compile(get_target("cpu"), options);
    EXPECT_EQ(p.planned_memory_bytes(), 2 * s.bytes());
    auto x = generate_argument(s, 3);
    auto out = p.eval({{"x", x}});
    // Nine negations then relu: max(-x, 0).
    auto in = x.to_vector<float>();
    auto got = out[0].to_vector<float>();
    for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(got[i], std::max(-in[i], 0.0f)) << i;
}

TEST(cpu_target, outputs_own_their_memory_across_runs) {
    program p;
    module* m = p.get_main_module();
    shape s{dtype::float_type, {8}};
    auto x = m->add_parameter("x", s);
    m->add_return({m->add_instruction(make_op("exp"), {x})});
    p.compile(get_target("cpu"));
    auto first = p.eval({{"x", generate_argument(s, 1)}});
    auto keep = first[0].to_vector<float>();
    auto second = p.eval({{"x", generate_argument(s, 2)}});
    EXPECT_EQ(first[0].to_vector<float>(), keep);
    EXPECT_NE(first[0].data(), second[0].data());
}
