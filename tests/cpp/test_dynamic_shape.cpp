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
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [{"min": 1, "max": 4}, {"min": 1, "max": 8, "optimals": [9]}]})"),
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
    expect_error(parse(R"({"type": "float_type", "dyn_dims": [{"min": 1, "max": 4611686018427387904}, {"min": 1, "max": 4611686018427387904}]})"),
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
