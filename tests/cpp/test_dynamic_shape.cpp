// Dynamic dimensions through the IR: their JSON form, modules whose
// parameters have ranges, and specialisation to static modules.
#include <gtest/gtest.h>

#include <string>

#include "io/json_codec.hpp"
#include "test_helpers.hpp"

using namespace kiln;

namespace {

// Runs `f` and expects a kiln::error of `kind` whose message contains every needle.
template <class F>
void expect_error(F&& f, error_kind kind, const std::vector<std::string>& needles) {
    try {
        f();
        ADD_FAILURE() << "expected an error mentioning '" << needles.front() << "'";
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        for (const auto& needle : needles) EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

shape batch_by_4() { return shape::from_dyn_dims(dtype::float_type, {{1, 8, {2, 4}}, dynamic_dimension(4)}); }

}  // namespace

// ---- JSON form -------------------------------------------------------------

TEST(dynamic_shape_json, round_trip_keeps_ranges_and_optimals) {
    shape s = batch_by_4();
    io::json j = io::shape_to_json(s);
    EXPECT_FALSE(j.contains("lens"));
    ASSERT_TRUE(j.contains("dyn_dims"));
    EXPECT_EQ(j["dyn_dims"][0]["min"], 1);
    EXPECT_EQ(j["dyn_dims"][0]["max"], 8);
    EXPECT_EQ(j["dyn_dims"][0]["optimals"], io::json::array({2, 4}));
    EXPECT_EQ(j["dyn_dims"][1]["min"], 4);
    EXPECT_EQ(j["dyn_dims"][1]["max"], 4);
    shape back = io::json_to_shape(j);
    EXPECT_EQ(back, s);
    EXPECT_TRUE(back.dynamic());
    EXPECT_EQ(to_string(back), "float_type, {1..8@{2, 4}, 4}");
}

TEST(dynamic_shape_json, static_shapes_keep_their_old_form) {
    shape s{dtype::half_type, {2, 3}, {1, 2}};
    io::json j = io::shape_to_json(s);
    EXPECT_FALSE(j.contains("dyn_dims"));
    EXPECT_EQ(io::json_to_shape(j), s);
    // A file written before ranges existed.
    auto old = io::json::parse(R"({"type": "float_type", "lens": [3, 4], "strides": [4, 1]})");
    EXPECT_EQ(io::json_to_shape(old), (shape{dtype::float_type, {3, 4}}));
}

TEST(dynamic_shape_json, optimals_may_be_left_out) {
    auto j = io::json::parse(R"({"type": "float_type", "dyn_dims": [{"min": 1, "max": 64}, {"min": 3, "max": 3}]})");
    shape s = io::json_to_shape(j);
    EXPECT_EQ(to_string(s), "float_type, {1..64, 3}");
    EXPECT_EQ(s.lens(), (std::vector<std::size_t>{64, 3}));
    EXPECT_EQ(s.min_lens(), (std::vector<std::size_t>{1, 3}));
}

TEST(dynamic_shape_json, malformed_ranges_are_parse_errors) {
    auto parse = [](const char* text) { return [text] { io::json_to_shape(io::json::parse(text)); }; };
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [{"min": 9, "max": 2}]})"), error_kind::parse_error,
                 {"dyn_dims[0]", "min 9 is greater than max 2"});
    expect_error(parse(R"({"type": "float_type",
                           "dyn_dims": [{"min": 1, "max": 4}, {"min": 1, "max": 8, "optimals": [9]}]})"),
                 error_kind::parse_error, {"dyn_dims[1]", "optimal 9 is outside [1, 8]"});
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [{"min": "1", "max": 4}]})"), error_kind::parse_error,
                 {"dyn_dims[0].min", "non-negative integer"});
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [{"min": -1, "max": 4}]})"), error_kind::parse_error,
                 {"dyn_dims[0].min", "non-negative integer"});
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [{"max": 4}]})"), error_kind::parse_error,
                 {"missing 'min'"});
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [3]})"), error_kind::parse_error,
                 {"dyn_dims[0]", "must be an object"});
    expect_error(parse(R"({"type": "float_type", "dyn_dims": {"min": 1}})"), error_kind::parse_error,
                 {"'dyn_dims' must be an array"});
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [{"min": 1, "max": 4, "optimals": 2}]})"),
                 error_kind::parse_error, {"'optimals' must be an array"});
    expect_error(parse(R"({"type": "float_type", "lens": [4], "strides": [1], "dyn_dims": [{"min": 1, "max": 4}]})"),
                 error_kind::parse_error, {"not both"});
    // 2^62 elements along each of two dims.
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [{"min": 1, "max": 4611686018427387904},
                                                             {"min": 1, "max": 4611686018427387904}]})"),
                 error_kind::parse_error, {"too large"});
}

TEST(dynamic_shape_json, uncompiled_program_with_a_dynamic_parameter_survives_save_and_load) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", batch_by_4());
    m->add_return({x});
    std::string bytes = save_buffer(p);
    program q = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(q.get_main_module()->get_parameter_shapes().at("x"), batch_by_4());
    EXPECT_EQ(to_string(q), to_string(p));
}

// ---- modules over ranges ---------------------------------------------------

namespace {

value axes(std::vector<std::int64_t> v) { return value_list(v.begin(), v.end()); }

// Made-up ops for what no built-in op does over a range.
// {10 - n}: the result gets shorter as the input grows.
struct countdown : op_base {
    std::string name() const { return "countdown"; }
    shape compute_shape(const std::vector<shape>& inputs) const {
        return {dtype::float_type, {10 - inputs.at(0).lens().at(0)}};
    }
    void compute(const argument&, const std::vector<argument>&) const {}
};

// Two results, as a tuple.
struct pair_of_copies : op_base {
    std::string name() const { return "pair_of_copies"; }
    shape compute_shape(const std::vector<shape>& inputs) const { return shape::tuple({inputs.at(0), inputs.at(0)}); }
    void compute(const argument&, const std::vector<argument>&) const {}
};

// A dynamic result from static inputs, which only a broken op would give.
struct widen : op_base {
    std::string name() const { return "widen"; }
    shape compute_shape(const std::vector<shape>& inputs) const {
        return shape::from_dyn_dims(inputs.at(0).type(), {{1, inputs.at(0).lens().at(0)}});
    }
    void compute(const argument&, const std::vector<argument>&) const {}
};

const std::vector<float> weights_4x3 = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f, -2.0f, 1.0f, 0.5f, 1.0f, -0.5f, 0.125f};

// x: {1..8, 4} -> dot with a {4, 3} literal -> relu -> reduce_sum over axis 1.
program dot_relu_sum() {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", batch_by_4());
    auto w = m->add_literal(literal(shape{dtype::float_type, {4, 3}}, weights_4x3));
    auto d = m->add_instruction(make_op("dot"), {x, w});
    auto r = m->add_instruction(make_op("relu"), {d});
    auto s = m->add_instruction(make_op("reduce_sum", value_map{{"axes", axes({1})}}), {r});
    m->add_return({s});
    return p;
}

// The same computation in plain loops.
std::vector<float> dot_relu_sum_reference(const std::vector<float>& x, std::size_t batch) {
    std::vector<float> out(batch, 0.0f);
    for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t j = 0; j < 3; ++j) {
            float acc = 0.0f;
            for (std::size_t k = 0; k < 4; ++k) acc += x[b * 4 + k] * weights_4x3[k * 3 + j];
            out[b] += std::max(acc, 0.0f);
        }
    return out;
}

// `generic` specialised for `lens`, as the main module of a program.
program specialised_program(const module& generic, const std::map<std::string, std::vector<std::size_t>>& lens) {
    program p;
    *p.get_main_module() = specialise(generic, lens);
    return p;
}

}  // namespace

TEST(dynamic_shape_module, results_downstream_of_a_range_get_ranges) {
    program p = dot_relu_sum();
    const module& m = *p.get_main_module();
    std::vector<std::string> shapes;
    for (const auto& ins : m)
        if (!ins.is_return()) shapes.push_back(to_string(ins.get_shape()));
    EXPECT_EQ(shapes, (std::vector<std::string>{"float_type, {1..8@{2, 4}, 4}", "float_type, {4, 3}, {3, 1}",
                                                "float_type, {1..8, 3}", "float_type, {1..8, 3}",
                                                "float_type, {1..8, 1}"}));
    EXPECT_EQ(m.get_output_shapes().front().min_lens(), (std::vector<std::size_t>{1, 1}));
    EXPECT_TRUE(has_dynamic_parameters(m));
    EXPECT_NO_THROW(verify_program(p));
}

TEST(dynamic_shape_module, printing_shows_the_ranges) {
    std::string text = to_string(*dot_relu_sum().get_main_module());
    EXPECT_NE(text.find("x = @param:x -> float_type, {1..8@{2, 4}, 4}"), std::string::npos) << text;
    EXPECT_NE(text.find("dot(x,@1) -> float_type, {1..8, 3}"), std::string::npos) << text;
}

TEST(dynamic_shape_module, broadcasting_add_keeps_the_range) {
    module m;
    auto x = m.add_parameter("x", batch_by_4());
    auto b = m.add_literal(literal(shape{dtype::float_type, {4}}, std::vector<float>{1, 2, 3, 4}));
    auto sum = m.add_instruction(make_op("add"), {x, b});
    EXPECT_EQ(to_string(sum->get_shape()), "float_type, {1..8, 4}");
    // Two independent ranges: the result spans both corners.
    auto y = m.add_parameter("y", shape::from_dyn_dims(dtype::float_type, {{1, 8}, {4, 4}}));
    auto both = m.add_instruction(make_op("mul"), {sum, y});
    EXPECT_EQ(to_string(both->get_shape()), "float_type, {1..8, 4}");
    m.add_return({both});
    EXPECT_NO_THROW(verify_module(m));
}

TEST(dynamic_shape_module, results_that_do_not_depend_on_the_range_stay_static) {
    module m;
    auto x = m.add_parameter("x", batch_by_4());
    auto total = m.add_instruction(make_op("reduce_sum", value_map{{"axes", axes({0})}}), {x});
    EXPECT_FALSE(total->get_shape().dynamic());
    EXPECT_EQ(total->get_shape(), (shape{dtype::float_type, {1, 4}}));
}

TEST(dynamic_shape_module, reshape_with_inferred_or_copied_dims_follows_the_batch) {
    module m;
    auto x = m.add_parameter("x", batch_by_4());
    auto pairs = m.add_instruction(make_op("reshape", value_map{{"dims", axes({-1, 2})}}), {x});
    EXPECT_EQ(to_string(pairs->get_shape()), "float_type, {2..16, 2}");
    auto split = m.add_instruction(make_op("reshape", value_map{{"dims", axes({0, 2, 2})}}), {x});
    EXPECT_EQ(to_string(split->get_shape()), "float_type, {1..8, 2, 2}");
    m.add_return({pairs, split});
    EXPECT_NO_THROW(verify_module(m));
}

TEST(dynamic_shape_module, reshape_to_fixed_dims_is_a_clear_error) {
    module m;
    auto x = m.add_parameter("x", batch_by_4());
    expect_error([&] { m.add_instruction(make_op("reshape", value_map{{"dims", axes({8, 4})}}), {x}); },
                 error_kind::invalid_argument,
                 {"cannot add 'reshape", "minimum extents ({1, 4})", "float_type, {1..8@{2, 4}, 4}"});
}

TEST(dynamic_shape_module, compute_shape_failing_or_changing_rank_at_a_corner_is_an_error) {
    module m;
    auto y = m.add_parameter("y", shape::from_dyn_dims(dtype::float_type, {{1, 4}, dynamic_dimension(3)}));
    // Removing axis 0 works only while it is 1.
    expect_error([&] { m.add_instruction(make_op("squeeze", value_map{{"axes", axes({0})}}), {y}); },
                 error_kind::invalid_argument, {"cannot add 'squeeze", "maximum extents ({4, 3})"});
    // Removing every axis of extent 1 changes the rank across the range.
    expect_error([&] { m.add_instruction(make_op("squeeze"), {y}); }, error_kind::invalid_argument,
                 {"cannot add 'squeeze", "the dtype or rank changes", "minimum extents ({1, 3})"});
}

TEST(dynamic_shape_module, a_result_that_shrinks_as_the_inputs_grow_is_an_error) {
    module m;
    auto x = m.add_parameter("x", shape::from_dyn_dims(dtype::float_type, {{1, 8}}));
    expect_error([&] { m.add_instruction(countdown{}, {x}); }, error_kind::invalid_argument,
                 {"cannot add 'countdown", "dimension 0 shrinks as the inputs grow", "{9}, {1} at the minimum"});
}

TEST(dynamic_shape_module, tuple_results_over_ranges_are_not_supported_yet) {
    module m;
    auto x = m.add_parameter("x", batch_by_4());
    expect_error([&] { m.add_instruction(pair_of_copies{}, {x}); }, error_kind::not_implemented,
                 {"cannot add 'pair_of_copies", "several results", "not support inputs with dynamic shapes yet"});
}

TEST(dynamic_shape_module, literals_cannot_be_dynamic) {
    module m;
    literal lit(shape::from_dyn_dims(dtype::float_type, {{1, 2}}), std::vector<float>{1, 2});
    expect_error([&] { m.add_literal(lit); }, error_kind::invalid_argument, {"literal cannot have a dynamic shape"});
}

TEST(dynamic_shape_module, ops_taking_modules_refuse_dynamic_inputs) {
    program p;
    module* m = p.get_main_module();
    auto cond = m->add_parameter("cond", shape{dtype::bool_type, {1}});
    auto x = m->add_parameter("x", batch_by_4());
    shape pair{dtype::float_type, {2}};
    module* then_branch = p.create_module("then");
    then_branch->add_return({then_branch->add_literal(literal(pair, std::vector<float>{1, 2}))});
    module* else_branch = p.create_module("else");
    else_branch->add_return({else_branch->add_literal(literal(pair, std::vector<float>{3, 4}))});
    expect_error([&] { m->add_instruction(make_op("if"), {cond, x}, {then_branch, else_branch}); },
                 error_kind::not_implemented, {"cannot add 'if", "do not support inputs with dynamic shapes yet"});
}

TEST(dynamic_shape_module, verifier_rejects_a_range_that_no_parameter_brings) {
    module m;
    auto x = m.add_parameter("x", shape{dtype::float_type, {8, 4}});
    m.add_return({m.add_instruction(widen{}, {x})});
    expect_error([&] { verify_module(m); }, error_kind::runtime,
                 {"verifier", "(widen)", "neither a parameter nor downstream of one with a dynamic shape"});
}

// ---- specialisation ----------------------------------------------------------

TEST(dynamic_shape_specialise, specialised_programs_match_a_plain_reference) {
    program generic = dot_relu_sum();
    for (std::size_t batch : {1u, 5u, 8u}) {
        program p = specialised_program(*generic.get_main_module(), {{"x", {batch, 4}}});
        EXPECT_FALSE(has_dynamic_parameters(*p.get_main_module()));
        EXPECT_EQ(p.get_output_shapes().front(), (shape{dtype::float_type, {batch, 1}}));
        ASSERT_NO_THROW(verify_program(p));
        shape xs{dtype::float_type, {batch, 4}};
        argument x = generate_argument(xs, batch);
        auto outputs = test::run_on(p, "ref", {{"x", x}});
        ASSERT_EQ(outputs.size(), 1u);
        auto got = outputs[0].to_vector<float>();
        auto expected = dot_relu_sum_reference(x.to_vector<float>(), batch);
        ASSERT_EQ(got.size(), expected.size());
        for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-4f) << "batch " << batch;
    }
}

TEST(dynamic_shape_specialise, keeps_names_origins_and_leaves_the_generic_module_alone) {
    program generic = dot_relu_sum();
    module* g = generic.get_main_module();
    std::next(g->begin(), 2)->set_origin("MatMul_0");
    module s = specialise(*g, {{"x", {3, 4}}});
    EXPECT_EQ(s.name(), "main");
    EXPECT_EQ(s.get_parameter_names(), std::vector<std::string>{"x"});
    EXPECT_EQ(std::next(s.begin(), 2)->origin(), "MatMul_0");
    EXPECT_EQ(std::next(s.begin(), 2)->get_shape(), (shape{dtype::float_type, {3, 3}}));
    EXPECT_EQ(s.size(), g->size());
    EXPECT_TRUE(has_dynamic_parameters(*g));
    EXPECT_NO_THROW(verify_module(s));
}

TEST(dynamic_shape_specialise, bad_extents_name_the_input_and_its_range) {
    program generic = dot_relu_sum();
    const module& g = *generic.get_main_module();
    expect_error([&] { specialise(g, {{"x", {9, 4}}}); }, error_kind::invalid_argument,
                 {"input 'x': extents {9, 4} are outside {1..8, 4}"});
    expect_error([&] { specialise(g, {{"x", {2, 5}}}); }, error_kind::invalid_argument,
                 {"input 'x': extents {2, 5} are outside {1..8, 4}"});
    expect_error([&] { specialise(g, {{"x", {2}}}); }, error_kind::invalid_argument,
                 {"input 'x': extents {2} are outside {1..8, 4}", "rank 1, expected 2"});
    expect_error([&] { specialise(g, {}); }, error_kind::invalid_argument,
                 {"input 'x': no extents given for its range {1..8, 4}"});
    expect_error([&] { specialise(g, {{"x", {2, 4}}, {"z", {1}}}); }, error_kind::invalid_argument,
                 {"input 'z'", "no parameter of that name"});
}

TEST(dynamic_shape_specialise, static_parameters_may_be_listed_with_their_own_lens) {
    module m;
    auto x = m.add_parameter("x", batch_by_4());
    auto b = m.add_parameter("b", shape{dtype::float_type, {4}});
    m.add_return({m.add_instruction(make_op("add"), {x, b})});
    module s = specialise(m, {{"x", {6, 4}}, {"b", {4}}});
    EXPECT_EQ(s.get_output_shapes().front(), (shape{dtype::float_type, {6, 4}}));
    expect_error([&] { specialise(m, {{"x", {6, 4}}, {"b", {5}}}); }, error_kind::invalid_argument,
                 {"input 'b': extents {5} are outside {4}"});
}

TEST(dynamic_shape_specialise, an_op_that_rejects_the_extents_names_them) {
    // Valid at both ends of the range, invalid in between: reshape to pairs of an odd count.
    module m;
    auto x = m.add_parameter("x", shape::from_dyn_dims(dtype::float_type, {{2, 4}}));
    m.add_return({m.add_instruction(make_op("reshape", value_map{{"dims", axes({-1, 2})}}), {x})});
    EXPECT_EQ(m.get_output_shapes().front(), shape::from_dyn_dims(dtype::float_type, {{1, 2}, dynamic_dimension(2)}));
    EXPECT_NO_THROW(specialise(m, {{"x", {4}}}));
    expect_error([&] { specialise(m, {{"x", {3}}}); }, error_kind::invalid_argument,
                 {"specialising module 'main' for x: {3}", "cannot add 'reshape"});
}

TEST(dynamic_shape_specialise, a_static_module_specialises_to_a_copy) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", shape{dtype::float_type, {2, 3}});
    m->add_return({m->add_instruction(make_op("relu"), {x})});
    EXPECT_FALSE(has_dynamic_parameters(*m));
    module s = specialise(*m, {});
    EXPECT_EQ(to_string(s), to_string(*m));
}

TEST(dynamic_shape_specialise, module_arguments_stay_pointed_at_the_programs_modules) {
    // An if on static inputs next to a dynamic parameter: the copy takes the same branch
    // modules, as module's copy constructor does; the program then runs the copy.
    program p;
    module* yes = p.create_module("yes");
    yes->add_return({yes->add_literal(literal(shape{dtype::float_type, {4}}, std::vector<float>{1, 2, 3, 4}))});
    module* no = p.create_module("no");
    no->add_return({no->add_literal(literal(shape{dtype::float_type, {4}}, std::vector<float>{-1, -2, -3, -4}))});
    module* m = p.get_main_module();
    auto c = m->add_parameter("c", shape{dtype::bool_type});
    auto x = m->add_parameter("x", batch_by_4());
    auto branch = m->add_instruction(make_op("if"), {c}, {yes, no});
    auto offset = m->add_instruction(make_op("get_tuple_elem", value_map{{"index", value(std::int64_t{0})}}), {branch});
    m->add_return({m->add_instruction(make_op("add"), {x, offset})});
    ASSERT_NO_THROW(verify_program(p));

    *m = specialise(*m, {{"x", {2, 4}}});
    EXPECT_EQ(std::next(m->begin(), 2)->module_inputs(), (std::vector<module_ref>{yes, no}));
    ASSERT_NO_THROW(verify_program(p));
    argument xs = test::make_argument(shape{dtype::float_type, {2, 4}}, {0, 0, 0, 0, 10, 10, 10, 10});
    argument cond = test::make_argument(shape{dtype::bool_type}, {1});
    auto out = test::run_on(p, "ref", {{"c", cond}, {"x", xs}});
    EXPECT_EQ(out.at(0).to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 11, 12, 13, 14}));
}

TEST(dynamic_shape_specialise, a_loaded_generic_program_specialises_like_the_original) {
    program generic = dot_relu_sum();
    std::string bytes = save_buffer(generic);
    program loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(to_string(loaded), to_string(generic));
    module a = specialise(*generic.get_main_module(), {{"x", {5, 4}}});
    module b = specialise(*loaded.get_main_module(), {{"x", {5, 4}}});
    EXPECT_EQ(to_string(a), to_string(b));
}
