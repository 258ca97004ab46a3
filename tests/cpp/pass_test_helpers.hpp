#pragma once
// Helpers for pass tests: run one pass with the verifier on, count ops, and
// check that an optimized module computes what the original computes on ref.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"
#include "targets/ref/ref_target.hpp"
#include "test_helpers.hpp"

namespace kiln::test {

// A copy of `m` after `passes`, verified after each one.
inline module after_passes(const module& m, const pass_list& passes) {
    module copy = m;
    compile_options options;
    options.verify_passes = true;
    run_passes(copy, passes, options);
    return module(copy);  // a prvalue: module is not movable
}

template <class Pass>
module after_pass(const module& m, Pass p = {}) {
    return after_passes(m, {std::make_shared<Pass>(std::move(p))});
}

inline std::size_t count_ops(const module& m, const std::string& op_name) {
    std::size_t n = 0;
    for (const auto& ins : m) n += ins.name() == op_name ? 1 : 0;
    return n;
}

// Names of the computing instructions in order (no params, literals or return).
inline std::vector<std::string> op_names(const module& m) {
    std::vector<std::string> names;
    for (const auto& ins : m)
        if (!ins.is_param() && !ins.is_literal() && !ins.is_return()) names.push_back(ins.name());
    return names;
}

inline parameter_map random_inputs(const module& m, unsigned long seed) {
    parameter_map inputs;
    for (const auto& [name, s] : m.get_parameter_shapes()) inputs.emplace(name, generate_argument(s, seed++));
    return inputs;
}

// Evaluates both modules on ref for a few random inputs; outputs must agree
// within relative tolerance `tol` (0: bitwise-equal values, NaN equals NaN).
inline void expect_same_outputs(const module& original, const module& optimized, double tol = 0) {
    for (unsigned long seed : {1UL, 7UL, 42UL}) {
        auto inputs = random_inputs(original, seed);
        auto want = evaluate_module(original, inputs);
        auto got = evaluate_module(optimized, inputs);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t o = 0; o < want.size(); ++o) {
            ASSERT_EQ(got[o].get_shape().lens(), want[o].get_shape().lens()) << "output " << o;
            ASSERT_EQ(got[o].get_shape().type(), want[o].get_shape().type()) << "output " << o;
            for (std::size_t i = 0; i < want[o].get_shape().elements(); ++i) {
                double w = want[o].value_at(i), g = got[o].value_at(i);
                if (std::isnan(w)) {
                    EXPECT_TRUE(std::isnan(g)) << "output " << o << " element " << i;
                    continue;
                }
                EXPECT_LE(std::fabs(g - w), tol * (1 + std::fabs(w)))
                    << "output " << o << " element " << i << ": " << g << " vs " << w;
            }
        }
    }
}

// Compiles `p` for cpu (full pipeline, verifier on) and compares with ref
// on the unoptimized program.
inline void expect_cpu_matches_ref(const program& p, double tol = 1e-5) {
    program compiled = p;
    compile_options options;
    options.verify_passes = true;
    compiled.compile(get_target("cpu"), options);
    for (unsigned long seed : {3UL, 11UL}) {
        auto inputs = random_inputs(*p.get_main_module(), seed);
        auto want = evaluate_module(*p.get_main_module(), inputs);
        auto got = compiled.eval(inputs);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t o = 0; o < want.size(); ++o)
            for (std::size_t i = 0; i < want[o].get_shape().elements(); ++i)
                EXPECT_NEAR(got[o].value_at(i), want[o].value_at(i), tol * (1 + std::fabs(want[o].value_at(i))));
    }
}

inline shape float_shape(std::vector<std::size_t> lens) {
    return shape{dtype::float_type, std::move(lens)};
}

inline instruction_ref add_float_literal(module& m, std::vector<std::size_t> lens, std::vector<float> values) {
    return m.add_literal(literal(float_shape(std::move(lens)), values));
}

inline instruction_ref add_random_literal(module& m, std::vector<std::size_t> lens, unsigned long seed) {
    return m.add_literal(literal(generate_argument(float_shape(std::move(lens)), seed)));
}

inline value ints(std::vector<std::int64_t> v) {
    return value_list(v.begin(), v.end());
}

}  // namespace kiln::test
