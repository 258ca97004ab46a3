// target::passes_choosing_layout_by_length: the passes that make a ranged
// compile retry with compile_options::layouts_for_every_extent (program.cpp
// asks the target; ir knows no pass names). Each name must be a pass the
// target runs, and the option must make it choose one layout at every length.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kiln/target.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;

TEST(target_layout_passes, the_cpu_target_names_passes_it_runs) {
    const target& cpu = get_target("cpu");
    const auto names = cpu.passes_choosing_layout_by_length();
    ASSERT_FALSE(names.empty());
    std::set<std::string> runs;
    for (const auto& p : cpu.get_passes(compile_options{})) runs.insert(p->name());
    for (const auto& name : names) EXPECT_TRUE(runs.count(name) > 0) << name;
}

TEST(target_layout_passes, the_reference_target_names_none) {
    EXPECT_TRUE(get_target("ref").passes_choosing_layout_by_length().empty());
}

namespace {

// x [rows, 64] . W^T, W an nn.Linear-style [32, 64] literal: its layout after
// the cpu target's passes with `options`, as the lengths of the literal the
// product reads through at most a transpose.
std::vector<std::size_t> weights_layout(std::size_t rows, const compile_options& options) {
    module m;
    auto x = m.add_parameter("x", test::float_shape({rows, 64}));
    auto w = test::add_random_literal(m, {32, 64}, 5);
    auto wt = m.add_instruction(make_op("transpose", value_map{{"permutation", test::ints({1, 0})}}), {w});
    m.add_return({m.add_instruction(make_op("dot"), {x, wt})});
    run_passes(m, get_target("cpu").get_passes(options), options);
    for (const auto& ins : m)
        if (ins.is_literal() && ins.get_shape().elements() == 32 * 64) return ins.get_shape().lens();
    return {};
}

}  // namespace

TEST(target_layout_passes, one_layout_for_every_extent_is_the_many_rows_one) {
    // One row: a column loop reads W as stored, [32, 64]; 64 rows: oneDNN, row-major [64, 32].
    EXPECT_EQ(weights_layout(1, {}), (std::vector<std::size_t>{32, 64}));
    EXPECT_EQ(weights_layout(64, {}), (std::vector<std::size_t>{64, 32}));
    compile_options every_extent;
    every_extent.layouts_for_every_extent = true;
    EXPECT_EQ(weights_layout(1, every_extent), (std::vector<std::size_t>{64, 32}));
    EXPECT_EQ(weights_layout(64, every_extent), (std::vector<std::size_t>{64, 32}));
}
