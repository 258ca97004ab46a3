#include "ops/fused_pointwise.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

program as_program(const module& m) {
    program p;
    *p.get_main_module() = m;
    return p;
}

}  // namespace

TEST(pass_fuse_pointwise, chain_becomes_one_op) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto y = m.add_parameter("y", float_shape({3}));
    auto a = add(m, "mul", {x, y});
    auto b = add(m, "erf", {a});
    auto c = add(m, "add", {b, x});
    m.add_return({add(m, "tanh", {c})});
    module out = after_pass<fuse_pointwise>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "x = @param:x -> float_type, {2, 3}, {3, 1}\n"
              "y = @param:y -> float_type, {3}, {1}\n"
              "@2 = fused_pointwise[steps={{\"mul\", {0, 1}}, {\"erf\", {2}}, {\"add\", {3, 0}}, {\"tanh\", {4}}}](x,y)"
              " -> float_type, {2, 3}, {3, 1}\n"
              "@3 = @return(@2)\n");
    expect_same_outputs(m, out);
    expect_cpu_matches_ref(as_program(m));
}

TEST(pass_fuse_pointwise, tree_with_broadcasts_and_a_value_read_twice_inside) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 5}));
    auto y = m.add_parameter("y", float_shape({5}));
    auto z = m.add_parameter("z", float_shape({3, 1}));
    auto e = add(m, "exp", {x});
    auto left = add(m, "mul", {e, y});
    auto right = add(m, "sub", {z, e});  // e has two users, both in the group
    m.add_return({add(m, "max", {left, right})});
    module out = after_pass<fuse_pointwise>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_pointwise"}) << out;
    expect_same_outputs(m, out);
    expect_cpu_matches_ref(as_program(m));
}

TEST(pass_fuse_pointwise, value_read_outside_ends_the_group) {
    module m;
    auto x = m.add_parameter("x", float_shape({4, 8}));
    auto e = add(m, "exp", {x});
    auto n = add(m, "neg", {e});
    auto s = add(m, "sigmoid", {n});
    auto r = add(m, "relu", {e});  // a second group reads e
    m.add_return({s, r});
    module out = after_pass<fuse_pointwise>(m);
    // {neg, sigmoid} fuse; exp stays (read by both groups); relu is alone.
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"exp", "fused_pointwise", "relu"})) << out;
    expect_same_outputs(m, out);
    expect_cpu_matches_ref(as_program(m));
}

TEST(pass_fuse_pointwise, returned_intermediate_is_not_fused_away) {
    module m;
    auto x = m.add_parameter("x", float_shape({5}));
    auto a = add(m, "abs", {x});
    auto b = add(m, "sqrt", {a});
    m.add_return({add(m, "neg", {b}), a});
    module out = after_pass<fuse_pointwise>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"abs", "fused_pointwise"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_fuse_pointwise, smaller_producers_and_other_types_and_single_ops_stay) {
    module m;
    auto x = m.add_parameter("x", float_shape({6, 5}));
    auto y = m.add_parameter("y", float_shape({5}));
    auto i = m.add_parameter("i", shape{dtype::int32_type, {6, 5}});
    auto h = m.add_parameter("h", shape{dtype::half_type, {6, 5}});
    auto per_column = add(m, "exp", {y});  // [5]: not recomputed for every row
    auto scaled = add(m, "mul", {x, per_column});
    auto ints = add(m, "neg", {add(m, "abs", {i})});
    auto halves = add(m, "tanh", {add(m, "exp", {h})});  // no kernel runs float16 programs
    // A float32 chain through a float16 value is cut there.
    auto through_half = add(m, "convert", {add(m, "sqrt", {add(m, "convert", {x}, value_map{{"target_type", "half_type"}})})},
                            value_map{{"target_type", "float_type"}});
    m.add_return({scaled, ints, halves, add(m, "relu", {through_half})});
    module out = after_pass<fuse_pointwise>(m);
    EXPECT_EQ(op_names(out),
              (std::vector<std::string>{"exp", "mul", "abs", "neg", "exp", "tanh", "convert", "sqrt", "convert", "relu"}))
        << out;
    expect_same_outputs(m, out);
}

TEST(pass_fuse_pointwise, bool_steps_where_convert_and_clip) {
    module m;
    auto x = m.add_parameter("x", float_shape({3, 7}));
    auto mask = m.add_parameter("mask", shape{dtype::bool_type, {7}});
    auto zero = add_float_literal(m, {}, {0});
    auto lo = add_float_literal(m, {}, {-0.25f});
    auto hi = add_float_literal(m, {1}, {0.5f});
    // The NaN guard exporters put after softmax, a mask, a clamp and a convert.
    auto nan = add(m, "not", {add(m, "equal", {x, x})});
    auto guarded = add(m, "where", {nan, zero, x});
    auto masked = add(m, "where", {mask, guarded, lo});
    auto positive = add(m, "convert", {add(m, "greater", {masked, zero})}, value_map{{"target_type", "float_type"}});
    auto clipped = add(m, "clip", {masked, lo, hi});
    m.add_return({add(m, "add", {clipped, positive})});
    module out = after_pass<fuse_pointwise>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_pointwise"}) << out;
    expect_same_outputs(m, out);
    expect_cpu_matches_ref(as_program(m));
}

TEST(pass_fuse_pointwise, strided_inputs_are_read_in_place) {
    module m;
    auto x = m.add_parameter("x", float_shape({4, 6, 5}));
    auto t = add(m, "transpose", {x}, value_map{{"permutation", ints({2, 0, 1})}});  // [5, 4, 6], not standard
    auto b = add(m, "broadcast", {m.add_parameter("b", float_shape({6}))}, value_map{{"out_lens", ints({5, 4, 6})}});
    m.add_return({add(m, "sigmoid", {add(m, "add", {t, b})})});
    module out = after_pass<fuse_pointwise>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"transpose", "broadcast", "fused_pointwise"})) << out;
    expect_same_outputs(m, out);
    expect_cpu_matches_ref(as_program(m));
}

TEST(fused_pointwise_op, attributes_round_trip_through_values_and_files) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto a = add(m, "convert", {x}, value_map{{"target_type", "bool_type"}});
    auto b = add(m, "convert", {add(m, "not", {a})}, value_map{{"target_type", "float_type"}});
    m.add_return({add(m, "mod", {b, x}, value_map{{"fmod", true}})});
    module fused = after_pass<fuse_pointwise>(m);
    ASSERT_EQ(op_names(fused), std::vector<std::string>{"fused_pointwise"});
    const instruction& ins = *std::next(fused.begin());
    operation rebuilt = make_op("fused_pointwise", ins.get_operator().attributes());
    EXPECT_EQ(rebuilt, ins.get_operator());
    EXPECT_EQ(to_string(rebuilt),
              "fused_pointwise[steps={{\"convert\", {0}, {target_type=\"bool_type\", saturate=true, "
              "round_mode=\"up\"}}, {\"not\", {1}}, {\"convert\", {2}, {target_type=\"float_type\", "
              "saturate=true, round_mode=\"up\"}}, {\"mod\", {3, 0}, {fmod=true}}}]");
    program p = as_program(fused);
    program loaded = [&] {
        std::string bytes = save_buffer(p);
        return load_buffer(bytes.data(), bytes.size());
    }();
    EXPECT_EQ(to_string(*loaded.get_main_module()), to_string(fused));
    expect_same_outputs(m, *loaded.get_main_module());
}

TEST(fused_pointwise_op, bad_programs_are_rejected_with_the_step_named) {
    auto shape_error = [](const value& steps, std::vector<shape> inputs) {
        try {
            make_op("fused_pointwise", value_map{{"steps", steps}}).compute_shape(inputs);
        } catch (const error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::vector<shape> two{float_shape({2}), float_shape({2})};
    EXPECT_NE(shape_error(value_list{}, two).find("no steps"), std::string::npos);
    EXPECT_NE(shape_error(value_list{value_list{"add", value_list{0, 3}}}, two).find("step 0 (add) reads value 3"),
              std::string::npos);
    EXPECT_NE(shape_error(value_list{value_list{"exp", value_list{0}}, value_list{"exp", value_list{1}}}, two)
                  .find("step 0 (exp) is never used"),
              std::string::npos);
    EXPECT_NE(shape_error(value_list{value_list{"add", value_list{0}}}, two).find("step 0 (add)"), std::string::npos);
    auto attribute_error = [](const value& steps) {
        try {
            make_op("fused_pointwise", value_map{{"steps", steps}});
        } catch (const error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(attribute_error(value_list{value_list{"dot", value_list{0, 1}}}).find("'dot' is not an elementwise op"),
              std::string::npos);
    EXPECT_NE(attribute_error(value_list{value_list{"add"}}).find("a fused_pointwise step must be"), std::string::npos);
    EXPECT_NE(attribute_error(value_list{value_list{"mod", value_list{0, 1}, value_map{{"bogus", 1}}}}).find("bogus"),
              std::string::npos);
}
