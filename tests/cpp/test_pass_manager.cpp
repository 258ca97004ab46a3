// run_passes: tracing, disabling by name (option and environment), the
// verifier after each pass, and the cpu pipeline as a whole.
#include <cstdlib>

#include "pass_test_helpers.hpp"
#include "scoped_env.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

module with_dead_and_constant_code() {
    module m;
    auto x = m.add_parameter("x", float_shape({3}));
    auto c = add_float_literal(m, {3}, {1, 2, 3});
    auto folded = m.add_instruction(make_op("exp"), {c});
    m.add_instruction(make_op("relu"), {x});  // dead
    m.add_return({m.add_instruction(make_op("add"), {x, folded})});
    return module(m);
}

pass_list dce_and_folding() {
    return {std::make_shared<dead_code_elimination>(), std::make_shared<constant_propagation>()};
}

// A pass that breaks the module: it makes an instruction use one defined after it.
class misordering_pass final : public pass {
public:
    std::string name() const override { return "misordering"; }
    void apply(module& m) const override {
        auto ret = m.get_return();
        m.insert_instruction(m.begin(), make_op("neg"), {ret->inputs().front()});
    }
};

}  // namespace

TEST(pass_manager, runs_passes_in_order_and_verifies_each) {
    module out = after_passes(with_dead_and_constant_code(), dce_and_folding());
    EXPECT_EQ(op_names(out), std::vector<std::string>{"add"}) << out;
}

TEST(pass_manager, disabling_by_name_skips_that_pass) {
    module m = with_dead_and_constant_code();
    compile_options options;
    options.verify_passes = true;
    options.disabled_passes = {"constant_propagation"};
    run_passes(m, dce_and_folding(), options);
    EXPECT_EQ(op_names(m), (std::vector<std::string>{"exp", "add"})) << m;
}

TEST(pass_manager, disabling_by_environment_variable_skips_those_passes) {
    scoped_env env("KILN_DISABLE_PASSES", "dead_code_elimination,constant_propagation");
    module m = with_dead_and_constant_code();
    std::string before = to_string(m);
    compile_options options;
    options.verify_passes = true;
    run_passes(m, dce_and_folding(), options);
    EXPECT_EQ(to_string(m), before);
}

TEST(pass_manager, tracing_prints_each_pass_with_its_time_and_ir) {
    module m = with_dead_and_constant_code();
    compile_options options;
    options.trace_passes = true;
    options.disabled_passes = {"constant_propagation"};
    testing::internal::CaptureStderr();
    run_passes(m, dce_and_folding(), options);
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("pass dead_code_elimination: "), std::string::npos) << log;
    EXPECT_NE(log.find(" ms\nmodule: \"main\""), std::string::npos) << log;
    EXPECT_NE(log.find("pass constant_propagation: disabled"), std::string::npos) << log;
}

TEST(pass_manager, tracing_by_environment_variable) {
    scoped_env env("KILN_TRACE_PASSES", "1");
    module m = with_dead_and_constant_code();
    testing::internal::CaptureStderr();
    run_passes(m, dce_and_folding(), compile_options{});
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("pass constant_propagation: "), std::string::npos) << log;
    EXPECT_NE(log.find("@literal"), std::string::npos) << log;
}

TEST(pass_manager, the_verifier_names_the_pass_that_broke_the_module) {
    module m = with_dead_and_constant_code();
    compile_options options;
    options.verify_passes = true;
    try {
        run_passes(m, {std::make_shared<misordering_pass>()}, options);
        FAIL() << "expected a verifier error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("after pass 'misordering'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("not defined before it"), std::string::npos) << e.what();
    }
}

TEST(pass_manager, cpu_pipeline_lists_the_simplification_passes_and_ref_none) {
    compile_options options;
    std::vector<std::string> names;
    for (const auto& p : get_target("cpu").get_passes(options)) names.push_back(p->name());
    for (const char* expected : {"dead_code_elimination", "constant_propagation", "simplify_reshapes",
                                 "simplify_algebra", "common_subexpression_elimination"})
        EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
    EXPECT_TRUE(get_target("ref").get_passes(options).empty());
}

TEST(pass_manager, cpu_compile_optimizes_and_matches_ref) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({2, 3}));
    auto c = add_float_literal(*m, {3}, {0, 0, 0});
    auto one = add_float_literal(*m, {1}, {1});
    auto a1 = m->add_instruction(make_op("add"), {x, c});
    auto a2 = m->add_instruction(make_op("add"), {x, c});
    auto e1 = m->add_instruction(make_op("exp"), {a1});
    auto e2 = m->add_instruction(make_op("exp"), {a2});
    auto scale = m->add_instruction(make_op("exp"), {one});
    auto prod = m->add_instruction(make_op("mul"), {e1, scale});
    m->add_return({m->add_instruction(make_op("add"), {prod, e2})});

    expect_cpu_matches_ref(p);
    program compiled = p;
    compile_options options;
    options.verify_passes = true;
    // Without pointwise fusion the simplified graph shows; with it, one op remains.
    options.disabled_passes = {"fuse_pointwise"};
    compiled.compile(get_target("cpu"), options);
    EXPECT_EQ(op_names(*compiled.get_main_module()), (std::vector<std::string>{"exp", "mul", "add"}))
        << *compiled.get_main_module();
    program fused = p;
    options.disabled_passes.clear();
    fused.compile(get_target("cpu"), options);
    EXPECT_EQ(op_names(*fused.get_main_module()), (std::vector<std::string>{"fused_pointwise"}))
        << *fused.get_main_module();
}
