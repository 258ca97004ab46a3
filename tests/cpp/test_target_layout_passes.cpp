// target::passes_choosing_layout_by_length: the passes a ranged compile
// retries without (program.cpp asks the target; ir knows no pass names).
// Each name must be a pass the target runs, or the retry would disable nothing.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kiln/target.hpp"

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
