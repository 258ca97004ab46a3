// Verification against ref: comparing values, per-instruction checking and
// pass bisection. Faults are injected on purpose (a pass that corrupts a
// literal, an executable whose step writes a wrong value or overwrites memory
// still in use) to show that the tools name the culprit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/kiln.hpp"
#include "pass_test_helpers.hpp"
#include "verify/float64_reference.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// relu(x + broadcast(c)) . w with x float[4, 8] and c all 2 (so relu passes everything).
program dense_program() {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({4, 8}));
    auto c = add_float_literal(*m, {8}, std::vector<float>(8, 2.0f));
    std::vector<float> w_values(8 * 3);
    for (std::size_t i = 0; i < w_values.size(); ++i) w_values[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
    auto w = add_float_literal(*m, {8, 3}, w_values);
    auto bc = m->add_instruction(make_op("broadcast", value_map{{"out_lens", ints({4, 8})}}), {c});
    auto sum = m->add_instruction(make_op("add"), {x, bc});
    auto r = m->add_instruction(make_op("relu"), {sum});
    m->add_return({m->add_instruction(make_op("dot"), {r, w})});
    return p;
}

// a = x + y; b = -y; return b * a: `a` must survive the step that computes `b`.
program reuse_program() {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({2, 5}));
    auto y = m->add_parameter("y", float_shape({2, 5}));
    auto a = m->add_instruction(make_op("add"), {x, y});
    auto b = m->add_instruction(make_op("neg"), {y});
    m->add_return({m->add_instruction(make_op("mul"), {b, a})});
    return p;
}

// main(c, x) = if c then (-x, x * x) else (|x|, x + 1.5), both results returned.
program if_program() {
    const shape vec3 = float_shape({3});
    program p;
    module* then_branch = p.create_module("then");
    module* else_branch = p.create_module("else");
    auto tx = then_branch->add_parameter("x", vec3);
    then_branch->add_return(
        {then_branch->add_instruction(make_op("neg"), {tx}), then_branch->add_instruction(make_op("mul"), {tx, tx})});
    auto ex = else_branch->add_parameter("x", vec3);
    auto c15 = add_float_literal(*else_branch, {3}, {1.5f, 1.5f, 1.5f});
    else_branch->add_return(
        {else_branch->add_instruction(make_op("abs"), {ex}), else_branch->add_instruction(make_op("add"), {ex, c15})});
    module* m = p.get_main_module();
    auto c = m->add_parameter("c", shape{dtype::bool_type});
    auto x = m->add_parameter("x", vec3);
    auto t = m->add_instruction(make_op("if"), {c, x}, {then_branch, else_branch});
    m->add_return({m->add_instruction(make_op("get_tuple_elem", value_map{{"index", std::int64_t{0}}}), {t}),
                   m->add_instruction(make_op("get_tuple_elem", value_map{{"index", std::int64_t{1}}}), {t})});
    return p;
}

parameter_map if_inputs(bool c) {
    literal cond(shape{dtype::bool_type}, std::vector<int>{c ? 1 : 0});
    return {{"c", cond.get_argument()}, {"x", make_argument(float_shape({3}), {-1.0f, 0.5f, 2.0f})}};
}

parameter_map inputs_for(const program& p, unsigned long seed = 3) {
    return random_inputs(*p.get_main_module(), seed);
}

// Printed name of the first instruction of `op_name` in `m`.
std::string name_of(const module& m, const std::string& op_name) {
    auto names = m.instruction_names();
    for (const auto& ins : m)
        if (ins.name() == op_name) return names.at(&ins);
    return "";
}

// ---- faults -----------------------------------------------------------------

// A test-only pass that adds 1 to the first element of the first float literal.
class corrupt_literal final : public pass {
public:
    std::string name() const override { return "corrupt_literal"; }
    void apply(module& m) const override {
        for (auto it = m.begin(); it != m.end(); ++it) {
            if (!it->is_literal() || it->get_shape().type() != dtype::float_type) continue;
            argument values = it->get_literal().get_argument().copy();
            values.data_as<float>()[0] += 1.0f;
            auto replacement = m.insert_literal(it, literal(values));
            m.replace_all_uses(it, replacement);
            m.remove_instruction(it);
            return;
        }
    }
};

class throwing_pass final : public pass {
public:
    std::string name() const override { return "throwing"; }
    void apply(module&) const override { fail("throwing pass ran"); }
};

// Makes the return read an instruction defined after it: the verifier rejects it.
class misordering_pass final : public pass {
public:
    std::string name() const override { return "misordering"; }
    void apply(module& m) const override {
        auto ret = m.get_return();
        m.insert_instruction(m.begin(), make_op("neg"), {ret->inputs().front()});
    }
};

// An executable that runs the cpu target's plan and lets a test tamper with
// each step just after it ran, before anyone observes it: a faulty kernel or
// a faulty memory plan, as the rest of the run (and any observer) sees it.
using step_tamper = std::function<void(const executed_step&)>;

class tampered_executable final : public executable {
public:
    tampered_executable(std::shared_ptr<executable> inner, step_tamper tamper)
        : inner_(std::move(inner)), tamper_(std::move(tamper)) {}
    std::vector<argument> run(const parameter_map& inputs) const override {
        return inner_->run_observed(inputs, tamper_);
    }
    std::vector<argument> run_profiled(const parameter_map& inputs, std::vector<step_timing>&) const override {
        return run(inputs);
    }
    std::vector<argument> run_observed(const parameter_map& inputs, const step_observer& observe) const override {
        return inner_->run_observed(inputs, [&](const executed_step& s) {
            tamper_(s);
            observe(s);
        });
    }

private:
    std::shared_ptr<executable> inner_;
    step_tamper tamper_;
};

// The cpu target with extra passes inserted into its pipeline and/or a
// tampered executable.
class faulty_cpu_target final : public target {
public:
    std::string name() const override { return "cpu"; }  // so copy_from and reports resolve to cpu
    pass_list get_passes(const compile_options& options) const override {
        pass_list passes = get_target("cpu").get_passes(options);
        passes.insert(passes.begin() + static_cast<std::ptrdiff_t>(insert_at), extra.begin(), extra.end());
        return passes;
    }
    std::shared_ptr<executable> lower(const module& m, const compile_options& options) const override {
        auto inner = get_target("cpu").lower(m, options);
        if (!tamper) return inner;
        return std::make_shared<tampered_executable>(inner, tamper);
    }

    pass_list extra;
    std::size_t insert_at = 0;
    step_tamper tamper;
};

}  // namespace

// ---- compare_values -----------------------------------------------------------

TEST(verify, compare_values_applies_the_tolerance_and_finds_the_first_mismatch) {
    shape s = float_shape({5});
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    argument expected = make_argument(s, {1.0f, nan, inf, 0.0f, 100.0f});
    argument got = make_argument(s, {1.00001f, nan, inf, 1e-6f, 100.5f});
    value_comparison c = compare_values(got, expected, {1e-4, 1e-5});
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.elements, 5u);
    EXPECT_EQ(c.mismatches, 1u);  // only 100.5 vs 100 is outside 1e-5 + 1e-4 * 100
    EXPECT_EQ(c.first_mismatch, 4u);
    EXPECT_DOUBLE_EQ(c.got_at_first, 100.5);
    EXPECT_DOUBLE_EQ(c.expected_at_first, 100.0);
    EXPECT_NEAR(c.max_abs_error, 0.5, 1e-9);
    EXPECT_TRUE(std::isinf(c.max_rel_error));  // 1e-6 against an expected 0
    EXPECT_TRUE(compare_values(got, expected, {1e-2, 1e-5}).ok());
    EXPECT_NE(describe(c).find("MISMATCH in 1 of 5 elements (first at index 4: got 100.5, expected 100)"),
              std::string::npos)
        << describe(c);

    argument nan_vs_number = make_argument(float_shape({1}), {nan});
    EXPECT_FALSE(compare_values(nan_vs_number, make_argument(float_shape({1}), {0.0f})).ok());

    value_comparison other_shape =
        compare_values(make_argument(float_shape({2, 2}), {1, 2, 3, 4}), make_argument(float_shape({4}), {1, 2, 3, 4}));
    EXPECT_FALSE(other_shape.same_shape);
    EXPECT_NE(describe(other_shape).find("{2, 2}"), std::string::npos) << describe(other_shape);
}

// ---- outputs --------------------------------------------------------------------

TEST(verify, outputs_match_the_unoptimized_module_on_ref) {
    for (const auto* t : {"ref", "cpu"}) {
        program original = dense_program();
        program compiled = original;
        compiled.compile(get_target(t));
        output_report r = verify_outputs(compiled, *original.get_main_module(), inputs_for(original));
        EXPECT_TRUE(r.passed()) << format_output_report(r);
        ASSERT_EQ(r.outputs.size(), 1u);
        EXPECT_NE(format_output_report(r).find("PASSED"), std::string::npos);
    }
}

// (x + 1e4) - 1e4 for x in (0, 1): ref's float32 evaluation loses x's low
// bits (1e4's ulp is ~1e-3), the float64 evaluation gives x exactly.
program cancelling_program() {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({6}));
    auto big = add_float_literal(*m, {6}, std::vector<float>(6, 1e4f));
    m->add_return({m->add_instruction(make_op("sub"), {m->add_instruction(make_op("add"), {x, big}), big})});
    return p;
}

// x + offset, compiled: a target's result `offset` away from the exact answer x.
program shifted_program(float offset) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({6}));
    m->add_return({m->add_instruction(make_op("add"), {x, add_float_literal(*m, {6}, std::vector<float>(6, offset))})});
    p.compile(get_target("ref"));
    return p;
}

const parameter_map cancelling_inputs{
    {"x", make_argument(float_shape({6}), {0.3f, 0.7f, 0.123f, 0.55f, 0.9f, 0.41f})}};

TEST(verify, outputs_differing_by_ref_rounding_are_judged_against_float64) {
    program reference = cancelling_program();
    output_report r = verify_outputs(shifted_program(0), *reference.get_main_module(), cancelling_inputs);
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_GT(r.outputs[0].mismatches, 0u);  // against ref's float32 result
    ASSERT_EQ(r.float64.size(), 1u);
    const float64_judgement& j = r.float64[0];
    EXPECT_TRUE(j.evaluated) << j.unavailable;
    EXPECT_EQ(j.judged, r.outputs[0].mismatches);
    EXPECT_EQ(j.rejected, 0u);
    EXPECT_EQ(j.worst_target_error, 0.0);  // x is exact
    EXPECT_GT(j.worst_ref_error, 1e-4);
    EXPECT_TRUE(r.passed()) << format_output_report(r);
    const std::string text = format_output_report(r);
    EXPECT_NE(text.find("accepted as float32 rounding"), std::string::npos) << text;
    EXPECT_NE(text.find("PASSED"), std::string::npos) << text;
}

TEST(verify, a_target_farther_from_float64_than_ref_still_fails) {
    program reference = cancelling_program();
    // 2e-3 off: farther from x than ref's float32 rounding (at most ~5e-4) plus the tolerance.
    output_report r = verify_outputs(shifted_program(2e-3f), *reference.get_main_module(), cancelling_inputs);
    ASSERT_EQ(r.float64.size(), 1u);
    EXPECT_TRUE(r.float64[0].evaluated);
    EXPECT_EQ(r.float64[0].rejected, r.outputs[0].mismatches);
    EXPECT_FALSE(r.passed());
    const std::string text = format_output_report(r);
    EXPECT_NE(text.find("a real mismatch"), std::string::npos) << text;
    EXPECT_NE(text.find("FAILED"), std::string::npos) << text;

    // Where ref is exact, any mismatch is the target's.
    program exact_reference = shifted_program(0);
    output_report off = verify_outputs(shifted_program(1e-3f), *exact_reference.get_main_module(), cancelling_inputs);
    EXPECT_FALSE(off.passed()) << format_output_report(off);
}

TEST(verify, outputs_that_match_need_no_float64_evaluation) {
    program reference = cancelling_program();
    program compiled = reference;
    compiled.compile(get_target("ref"));
    output_report r = verify_outputs(compiled, *reference.get_main_module(), cancelling_inputs);
    EXPECT_TRUE(r.passed()) << format_output_report(r);
    ASSERT_EQ(r.float64.size(), 1u);
    EXPECT_FALSE(r.float64[0].evaluated);
    EXPECT_EQ(format_output_report(r).find("float64"), std::string::npos);
}

TEST(verify, widened_module_computes_in_float64) {
    program p = cancelling_program();
    auto wide = widened_to_float64(*p.get_main_module());
    ASSERT_EQ(wide->get_output_shapes().size(), 1u);
    EXPECT_EQ(wide->get_output_shapes()[0].type(), dtype::double_type);
}

// ---- per instruction ------------------------------------------------------------

namespace {

// These tests look at separate add, relu, neg and mul steps; pointwise
// fusion would merge them into one.
compile_options unfused() {
    compile_options options;
    options.disabled_passes = {"fuse_pointwise"};
    return options;
}

}  // namespace

TEST(verify, per_instruction_passes_when_nothing_diverges) {
    for (const auto* t : {"ref", "cpu"}) {
        program p = dense_program();
        p.compile(get_target(t), unfused());
        // Default tolerances: oneDNN's matmul rounds differently from the reference dot.
        per_instruction_report r = verify_per_instruction(p, inputs_for(p));
        EXPECT_TRUE(r.passed()) << t << "\n" << format_per_instruction_report(r);
        // cpu runs add, relu and dot (the broadcast is a view); ref runs the broadcast too.
        EXPECT_EQ(r.checked, std::string(t) == "cpu" ? 3u : 4u) << t;
        ASSERT_EQ(r.outputs.size(), 1u);
        EXPECT_NE(format_per_instruction_report(r).find("PASSED"), std::string::npos);
    }
}

TEST(verify, per_instruction_names_a_faulty_step_and_not_the_ones_after_it) {
    program original = dense_program();
    program p = original;
    faulty_cpu_target faulty;
    std::string relu_name;
    faulty.tamper = [&](const executed_step& s) {
        if (s.op.name() == "relu") s.output.data_as<float>()[5] += 0.5f;
    };
    p.compile(faulty, unfused());
    relu_name = name_of(*p.get_main_module(), "relu");
    const std::string add_name = name_of(*p.get_main_module(), "add");
    parameter_map inputs = inputs_for(p);

    // The fault shows in the outputs, which only says that something is wrong.
    EXPECT_FALSE(verify_outputs(p, *original.get_main_module(), inputs).passed());

    per_instruction_report r = verify_per_instruction(p, inputs);
    EXPECT_FALSE(r.passed());
    ASSERT_EQ(r.divergences.size(), 1u) << format_per_instruction_report(r);  // not the dot that reads it
    const instruction_divergence& d = r.divergences.front();
    EXPECT_EQ(d.instruction, relu_name);
    EXPECT_EQ(d.op, "relu");
    EXPECT_EQ(d.changed_input, -1);
    EXPECT_EQ(d.input_names, std::vector<std::string>{add_name});
    EXPECT_EQ(d.output_shape.lens(), (std::vector<std::size_t>{4, 8}));
    EXPECT_EQ(d.difference.mismatches, 1u);
    EXPECT_EQ(d.difference.first_mismatch, 5u);
    EXPECT_NEAR(d.difference.max_abs_error, 0.5, 1e-6);
    // The input the step received is x + 2, and ref's relu of it is the expected value.
    ASSERT_EQ(d.inputs.size(), 1u);
    const argument& x = inputs.at("x");
    for (std::size_t i = 0; i < 32; ++i) {
        EXPECT_FLOAT_EQ(static_cast<float>(d.inputs[0].value_at(i)), static_cast<float>(x.value_at(i)) + 2.0f);
        EXPECT_FLOAT_EQ(static_cast<float>(d.expected.value_at(i)),
                        std::max(0.0f, static_cast<float>(x.value_at(i)) + 2.0f));
    }
    EXPECT_FLOAT_EQ(static_cast<float>(d.got.value_at(5) - d.expected.value_at(5)), 0.5f);

    std::string text = format_per_instruction_report(r);
    EXPECT_NE(text.find("first divergence: " + relu_name + " = relu(" + add_name + ")"), std::string::npos) << text;
    EXPECT_NE(text.find("reference compute on the inputs it received"), std::string::npos) << text;
    EXPECT_NE(text.find("input 0 (" + add_name + "): float_type {4, 8}"), std::string::npos) << text;
    EXPECT_NE(text.find("FAILED"), std::string::npos) << text;
}

TEST(verify, per_instruction_finds_a_value_overwritten_before_its_last_use) {
    program p = reuse_program();
    faulty_cpu_target faulty;
    argument add_output;  // a view of the arena, valid through the run
    faulty.tamper = [&](const executed_step& s) {
        if (s.op.name() == "add") add_output = s.output;
        if (s.op.name() == "neg") add_output.data_as<float>()[2] = 1000.0f;  // as a wrong memory plan would
    };
    p.compile(faulty, unfused());
    const module& m = *p.get_main_module();
    per_instruction_report r = verify_per_instruction(p, inputs_for(p));
    ASSERT_FALSE(r.divergences.empty()) << format_per_instruction_report(r);
    const instruction_divergence& d = r.divergences.front();
    EXPECT_EQ(d.instruction, name_of(m, "mul"));
    EXPECT_EQ(d.changed_input, 1);
    EXPECT_EQ(d.input_names, (std::vector<std::string>{name_of(m, "neg"), name_of(m, "add")}));
    EXPECT_EQ(d.difference.first_mismatch, 2u);
    EXPECT_DOUBLE_EQ(d.got.value_at(2), 1000.0);
    parameter_map inputs = inputs_for(p);
    EXPECT_FLOAT_EQ(static_cast<float>(d.expected.value_at(2)),
                    static_cast<float>(inputs.at("x").value_at(2)) + static_cast<float>(inputs.at("y").value_at(2)));
    std::string text = format_per_instruction_report(r);
    EXPECT_NE(text.find("input 1 (" + name_of(m, "add") + ") is not the value its producer computed"),
              std::string::npos)
        << text;
}

TEST(verify, per_instruction_needs_a_compiled_program_and_valid_inputs) {
    program p = dense_program();
    EXPECT_THROW(verify_per_instruction(p, inputs_for(p)), error);
    p.compile(get_target("cpu"));
    EXPECT_THROW(verify_per_instruction(p, {}), error);
    EXPECT_THROW(verify_per_instruction(p, {{"x", argument(float_shape({8, 4}))}}), error);
}

// ---- bisect ---------------------------------------------------------------------

TEST(verify, bisect_passes_every_stage_of_a_correct_pipeline) {
    program p = dense_program();
    // Default tolerances: the lowered cpu program's oneDNN matmul rounds differently from ref.
    bisect_report r = bisect_passes(p, get_target("cpu"), inputs_for(p));
    EXPECT_TRUE(r.passed()) << format_bisect_report(r);
    ASSERT_EQ(r.stages.size(), r.pipeline.size() + 1);
    EXPECT_EQ(r.pipeline.size(), get_target("cpu").get_passes({}).size());
    for (std::size_t i = 0; i < r.pipeline.size(); ++i) {
        EXPECT_EQ(r.stages[i].pass, r.pipeline[i]);
        EXPECT_EQ(r.stages[i].position, i + 1);
    }
    EXPECT_TRUE(r.stages.back().lowering);
    EXPECT_EQ(r.first_failure(), nullptr);
    std::string text = format_bisect_report(r);
    EXPECT_NE(text.find("lowered for cpu"), std::string::npos) << text;
    EXPECT_NE(text.find("PASSED"), std::string::npos) << text;
    EXPECT_FALSE(p.is_compiled());  // bisecting leaves the program alone

    bisect_report on_ref = bisect_passes(p, get_target("ref"), inputs_for(p));
    EXPECT_TRUE(on_ref.passed()) << format_bisect_report(on_ref);
    EXPECT_EQ(on_ref.stages.size(), 1u);  // ref has no passes: only its lowering
}

TEST(verify, bisect_names_the_pass_that_corrupts_a_literal) {
    program p = dense_program();
    faulty_cpu_target faulty;
    faulty.extra = {std::make_shared<corrupt_literal>()};
    faulty.insert_at = 3;
    bisect_report r = bisect_passes(p, faulty, inputs_for(p));
    EXPECT_FALSE(r.passed());
    ASSERT_EQ(r.stages.size(), 4u) << format_bisect_report(r);  // stops at the culprit
    for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(r.stages[i].ok()) << r.stages[i].pass;
    const bisect_stage* bad = r.first_failure();
    ASSERT_NE(bad, nullptr);
    EXPECT_EQ(bad->pass, "corrupt_literal");
    EXPECT_EQ(bad->position, 4u);
    EXPECT_TRUE(bad->failure.empty()) << bad->failure;
    ASSERT_EQ(bad->outputs.size(), 1u);
    EXPECT_FALSE(bad->outputs[0].ok());
    std::string text = format_bisect_report(r);
    const std::string culprit = "first pass that breaks the numbers: corrupt_literal (pass 4 of " +
                                std::to_string(r.pipeline.size()) + "); first diverging output 0";
    EXPECT_NE(text.find(culprit), std::string::npos)
        << text;
}

TEST(verify, bisect_names_a_pass_that_throws_or_breaks_the_ir) {
    program p = dense_program();
    for (const pass_list& extra :
         {pass_list{std::make_shared<throwing_pass>()}, pass_list{std::make_shared<misordering_pass>()}}) {
        faulty_cpu_target faulty;
        faulty.extra = extra;
        faulty.insert_at = 1;
        bisect_report r = bisect_passes(p, faulty, inputs_for(p));
        const bisect_stage* bad = r.first_failure();
        ASSERT_NE(bad, nullptr);
        EXPECT_EQ(bad->pass, extra.front()->name());
        EXPECT_EQ(bad->position, 2u);
        EXPECT_FALSE(bad->failure.empty());
        std::string text = format_bisect_report(r);
        EXPECT_NE(text.find("first pass that breaks the numbers: " + extra.front()->name()), std::string::npos) << text;
    }
}

TEST(verify, bisect_blames_the_lowering_when_every_pass_keeps_the_numbers) {
    program p = dense_program();
    faulty_cpu_target faulty;
    faulty.tamper = [](const executed_step& s) {
        if (s.op.name() == "fused_dot") s.output.data_as<float>()[0] = -7.0f;  // cpu runs the dot fused
    };
    bisect_report r = bisect_passes(p, faulty, inputs_for(p));
    const bisect_stage* bad = r.first_failure();
    ASSERT_NE(bad, nullptr) << format_bisect_report(r);
    EXPECT_TRUE(bad->lowering);
    EXPECT_EQ(r.stages.size(), r.pipeline.size() + 1);
    EXPECT_NE(format_bisect_report(r).find("the lowered program on target cpu does not"), std::string::npos);
}

TEST(verify, bisect_skips_disabled_passes_and_rejects_compiled_programs) {
    program p = dense_program();
    compile_options options;
    options.disabled_passes = {"simplify_algebra"};
    bisect_report r = bisect_passes(p, get_target("cpu"), inputs_for(p), {}, options);
    EXPECT_TRUE(r.passed());
    std::size_t disabled = 0;
    for (const auto& s : r.stages) disabled += s.disabled ? 1 : 0;
    EXPECT_EQ(disabled, 1u);
    EXPECT_NE(format_bisect_report(r).find("simplify_algebra"), std::string::npos);

    p.compile(get_target("cpu"));
    EXPECT_THROW(bisect_passes(p, get_target("cpu"), inputs_for(p)), error);
}

// ---- control flow -------------------------------------------------------------

TEST(verify, control_flow_is_checked_as_one_instruction_with_its_branches_on_ref) {
    for (const auto* t : {"ref", "cpu"})
        for (bool c : {true, false}) {
            program p = if_program();
            p.compile(get_target(t));
            per_instruction_report r = verify_per_instruction(p, if_inputs(c), {0, 0});
            EXPECT_TRUE(r.passed()) << t << "\n" << format_per_instruction_report(r);
            EXPECT_GE(r.checked, 1u);
            ASSERT_EQ(r.outputs.size(), 2u);
        }

    program p = if_program();
    faulty_cpu_target faulty;
    faulty.tamper = [](const executed_step& s) {
        if (s.op.name() == "if") s.output.data_as<float>()[1] += 1.0f;  // element 1 of the tuple's first value
    };
    p.compile(faulty);
    per_instruction_report r = verify_per_instruction(p, if_inputs(false));
    ASSERT_EQ(r.divergences.size(), 1u) << format_per_instruction_report(r);
    EXPECT_EQ(r.divergences[0].op, "if");
    EXPECT_EQ(r.divergences[0].difference.first_mismatch, 1u);
    EXPECT_EQ(r.divergences[0].difference.mismatches, 1u);
    EXPECT_DOUBLE_EQ(r.divergences[0].difference.expected_at_first, 0.5);  // |0.5| from the else branch
}

TEST(verify, bisect_runs_each_pass_on_the_branches_too) {
    program p = if_program();
    EXPECT_TRUE(bisect_passes(p, get_target("cpu"), if_inputs(false), {0, 0}).passed());
    // The only float literal is the else branch's 1.5: corrupting it must show when that branch runs.
    faulty_cpu_target faulty;
    faulty.extra = {std::make_shared<corrupt_literal>()};
    faulty.insert_at = 0;
    bisect_report r = bisect_passes(p, faulty, if_inputs(false));
    const bisect_stage* bad = r.first_failure();
    ASSERT_NE(bad, nullptr) << format_bisect_report(r);
    EXPECT_EQ(bad->pass, "corrupt_literal");
    ASSERT_EQ(bad->outputs.size(), 2u);
    EXPECT_TRUE(bad->outputs[0].ok());   // |x|
    EXPECT_FALSE(bad->outputs[1].ok());  // x + 1.5 became x + 2.5 in element 0
    EXPECT_DOUBLE_EQ(bad->outputs[1].got_at_first, 1.5);
    EXPECT_DOUBLE_EQ(bad->outputs[1].expected_at_first, 0.5);
    EXPECT_TRUE(bisect_passes(p, faulty, if_inputs(true)).passed());  // the then branch has no literal
}
