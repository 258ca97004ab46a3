#pragma once
// Helpers for single-op tests: build inputs of any dtype and layout, run one
// op directly and through a program on every target, and check errors.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "test_helpers.hpp"

namespace kiln::test {

// A standard-strided argument holding `values` (row-major) converted to `type`.
inline argument make(dtype type, const std::vector<std::size_t>& lens, const std::vector<double>& values) {
    return literal(shape{type, lens}, values).get_argument().copy();
}

// An argument with the given strides (e.g. a transposed or broadcast view);
// `values` are in row-major order of `lens`.
inline argument make_strided(dtype type, const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides,
                             const std::vector<double>& values) {
    shape s{type, lens, strides};
    argument a(s);
    argument source = make(type, lens, values);
    copy_values(source, a);
    return a;
}

inline bool close(double got, double want, double tol) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::fabs(got - want) <= tol * (1.0 + std::fabs(want));
}

inline void expect_values(const argument& out, const std::vector<std::size_t>& lens,
                          const std::vector<double>& expected, double tol, const std::string& where) {
    ASSERT_EQ(out.get_shape().lens(), lens) << where;
    ASSERT_TRUE(out.get_shape().standard()) << where;
    ASSERT_EQ(out.get_shape().elements(), expected.size()) << where;
    for (std::size_t i = 0; i < expected.size(); ++i)
        EXPECT_TRUE(close(out.value_at(i), expected[i], tol))
            << where << ": element " << i << " is " << out.value_at(i) << ", expected " << expected[i];
}

// Runs `op` on `inputs` directly (inputs as given, any strides) and through
// a one-instruction program on the ref and cpu targets; every result must
// have `lens` and match `expected` within relative tolerance `tol`.
inline void expect_op(const operation& op, const std::vector<argument>& inputs, const std::vector<std::size_t>& lens,
                      const std::vector<double>& expected, double tol = 1e-6) {
    std::vector<shape> shapes;
    for (const auto& a : inputs) shapes.push_back(a.get_shape());
    shape out = op.compute_shape(shapes);
    expect_values(op.evaluate(out, inputs), lens, expected, tol, to_string(op) + " evaluated directly");

    program p;
    module* m = p.get_main_module();
    std::vector<instruction_ref> params;
    parameter_map feed;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        std::string name = "x" + std::to_string(i);
        params.push_back(m->add_parameter(name, inputs[i].get_shape().as_standard()));
        feed[name] = inputs[i].contiguous();
    }
    m->add_return({m->add_instruction(op, params)});
    for (const char* t : {"ref", "cpu"}) {
        auto results = run_on(p, t, feed);
        ASSERT_EQ(results.size(), 1u) << t;
        expect_values(results[0].contiguous(), lens, expected, tol, to_string(op) + " on " + t);
    }
}

// compute_shape must reject `inputs` with a kiln::error whose message
// contains every string in `fragments`.
inline void expect_shape_error(const operation& op, const std::vector<shape>& inputs,
                               std::initializer_list<std::string> fragments) {
    try {
        op.compute_shape(inputs);
        ADD_FAILURE() << to_string(op) << ": expected an error";
    } catch (const error& e) {
        std::string msg = e.what();
        for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
}

}  // namespace kiln::test
