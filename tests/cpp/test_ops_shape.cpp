// Shape ops: expected values are worked out by hand or with numpy (the
// expression is given beside them). Every program runs on both targets, which
// also checks the cpu target's planning of views.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

#include "test_helpers.hpp"

using namespace kiln;

namespace {

using lens_t = std::vector<std::size_t>;
using values_t = std::vector<double>;

shape fshape(lens_t lens) {
    return {dtype::float_type, std::move(lens)};
}

// 0, 1, 2, ... in row-major order.
argument iota(const shape& s) {
    std::vector<double> v(s.elements());
    std::iota(v.begin(), v.end(), 0.0);
    return literal(s, v).get_argument().copy();
}

struct expected_output {
    lens_t lens;
    values_t values;
};

// Runs `p` on ref and cpu and checks every output's lens and values.
void expect_outputs(const program& p, const parameter_map& inputs, const std::vector<expected_output>& expected) {
    for (const auto* t : {"ref", "cpu"}) {
        auto out = test::run_on(p, t, inputs);
        ASSERT_EQ(out.size(), expected.size()) << t;
        for (std::size_t i = 0; i < out.size(); ++i) {
            EXPECT_EQ(out[i].get_shape().lens(), expected[i].lens) << t << " output " << i;
            EXPECT_TRUE(out[i].get_shape().standard()) << t << " output " << i;
            EXPECT_EQ(out[i].to_vector<double>(), expected[i].values) << t << " output " << i;
        }
    }
}

// One op applied to a parameter x of shape `s`, filled with iota.
void expect_unary(const operation& op, const shape& s, const expected_output& expected) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", s);
    m->add_return({m->add_instruction(op, {x})});
    expect_outputs(p, {{"x", iota(s)}}, {expected});
}

// compute_shape must throw an error of `kind` that names the op and says `detail`.
void expect_shape_error(const operation& op, const std::vector<shape>& inputs, const std::string& detail,
                        error_kind kind = error_kind::invalid_argument) {
    try {
        op.compute_shape(inputs);
        ADD_FAILURE() << to_string(op) << ": expected an error mentioning '" << detail << "'";
    } catch (const error& e) {
        std::string what = e.what();
        EXPECT_EQ(e.kind(), kind) << what;
        EXPECT_NE(what.find(op.name()), std::string::npos) << what;
        EXPECT_NE(what.find(detail), std::string::npos) << what;
    }
}

value_list ints(std::initializer_list<std::int64_t> v) {
    value_list out;
    for (auto i : v) out.emplace_back(i);
    return out;
}

values_t range(double begin, double end) {
    values_t v;
    for (double x = begin; x < end; ++x) v.push_back(x);
    return v;
}

}  // namespace

TEST(ops_shape, registry_lists_every_shape_op) {
    auto names = get_operators();
    for (const auto* n : {"reshape", "transpose", "broadcast", "slice", "concat", "squeeze", "unsqueeze", "flatten",
                          "split", "contiguous", "pad"})
        EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

// ---- reshape ----

TEST(ops_reshape, infers_minus_one_and_copies_zero_dims) {
    auto op = make_op("reshape", value_map{{"dims", ints({0, -1})}});
    shape in = fshape({2, 3, 4});
    EXPECT_EQ(op.compute_shape({in}), fshape({2, 12}));
    EXPECT_EQ(op.output_alias({in}), 0);
    expect_unary(op, in, {{2, 12}, range(0, 24)});
    expect_unary(make_op("reshape", value_map{{"dims", ints({4, 0, -1})}}), in, {{4, 3, 2}, range(0, 24)});
}

TEST(ops_reshape, of_a_transposed_input_copies_in_row_major_order) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({2, 3}));
    auto t = m->add_instruction(make_op("transpose"), {x});
    EXPECT_EQ(make_op("reshape", value_map{{"dims", ints({6})}}).output_alias({t->get_shape()}), -1);
    auto r = m->add_instruction(make_op("reshape", value_map{{"dims", ints({6})}}), {t});
    auto b = m->add_instruction(
        make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}),
        {m->add_instruction(make_op("slice", value_map{{"starts", ints({0})}, {"ends", ints({1})}}), {x})});
    auto rb = m->add_instruction(make_op("reshape", value_map{{"dims", ints({3, 2})}}), {b});
    m->add_return({r, rb});
    // np.arange(6).reshape(2,3).T.reshape(6); np.broadcast_to(x[0:1], (2,3)).reshape(3,2)
    expect_outputs(p, {{"x", iota(fshape({2, 3}))}}, {{{6}, {0, 3, 1, 4, 2, 5}}, {{3, 2}, {0, 1, 2, 0, 1, 2}}});
}

TEST(ops_reshape, of_a_standard_slice_stays_a_view_with_its_offset) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({4, 3}));
    auto s = m->add_instruction(
        make_op("slice", value_map{{"axes", ints({0})}, {"starts", ints({1})}, {"ends", ints({3})}}), {x});
    EXPECT_TRUE(s->get_shape().standard());
    auto reshape = make_op("reshape", value_map{{"dims", ints({-1})}});
    EXPECT_EQ(reshape.output_alias({s->get_shape()}), 0);
    auto r = m->add_instruction(reshape, {s});
    auto doubled = m->add_instruction(make_op("add"), {r, r});
    m->add_return({r, doubled});
    expect_outputs(p, {{"x", iota(fshape({4, 3}))}}, {{{6}, range(3, 9)}, {{6}, {6, 8, 10, 12, 14, 16}}});
}

TEST(ops_reshape, rejects_bad_dims) {
    shape in = fshape({2, 3, 4});
    auto with = [](std::initializer_list<std::int64_t> d) { return make_op("reshape", value_map{{"dims", ints(d)}}); };
    expect_shape_error(with({-1, -1}), {in}, "more than one -1");
    expect_shape_error(with({5, 5}), {in}, "cannot reshape input {2, 3, 4} (24 elements)");
    expect_shape_error(with({0, 0, 0, 0}), {in}, "has only 3 dims");
    expect_shape_error(with({-2, 12}), {in}, "only -1");
    expect_shape_error(with({5, -1}), {in}, "cannot infer the -1");
    expect_shape_error(with({-1}), {in, in}, "expected 1 input");
}

// ---- transpose ----

TEST(ops_transpose, permutes_lens_and_strides) {
    auto op = make_op("transpose", value_map{{"permutation", ints({1, 2, 0})}});
    shape out = op.compute_shape({fshape({2, 3, 4})});
    EXPECT_EQ(out, (shape{dtype::float_type, {3, 4, 2}, {4, 1, 12}}));
    // np.arange(24).reshape(2,3,4).transpose(1,2,0)
    expect_unary(op, fshape({2, 3, 4}),
                 {{3, 4, 2}, {0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17, 6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23}});
}

TEST(ops_transpose, empty_permutation_reverses_dims) {
    expect_unary(make_op("transpose"), fshape({2, 3}), {{3, 2}, {0, 3, 1, 4, 2, 5}});
}

TEST(ops_transpose, of_a_broadcast_and_of_unit_dims) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({3}));
    auto b = m->add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}), {x});
    auto t = m->add_instruction(make_op("transpose"), {b});
    m->add_return({t});
    expect_outputs(p, {{"x", iota(fshape({3}))}}, {{{3, 2}, {0, 0, 1, 1, 2, 2}}});
    // Moving a dim of extent 1 does not reorder memory: the view is still standard.
    EXPECT_TRUE(make_op("transpose").compute_shape({fshape({1, 3})}).standard());
}

TEST(ops_transpose, rejects_non_permutations) {
    shape in = fshape({2, 3});
    auto with = [](std::initializer_list<std::int64_t> d) {
        return make_op("transpose", value_map{{"permutation", ints(d)}});
    };
    expect_shape_error(with({0, 0}), {in}, "is not a permutation of 0..1");
    expect_shape_error(with({0}), {in}, "is not a permutation");
    expect_shape_error(with({0, 2}), {in}, "is not a permutation");
    expect_shape_error(with({-1, 0}), {in}, "is not a permutation");
}

// ---- broadcast ----

TEST(ops_broadcast, repeats_unit_and_missing_dims_with_stride_zero) {
    auto op = make_op("broadcast", value_map{{"out_lens", ints({2, 2, 3})}});
    EXPECT_EQ(op.compute_shape({fshape({2, 1})}), (shape{dtype::float_type, {2, 2, 3}, {0, 1, 0}}));
    expect_unary(op, fshape({2, 1}), {{2, 2, 3}, {0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1}});
    expect_unary(make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}), fshape({3}),
                 {{2, 3}, {0, 1, 2, 0, 1, 2}});
}

TEST(ops_broadcast, feeds_elementwise_and_works_on_transposed_input) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({2, 3}));
    auto b = m->add_parameter("b", fshape({3}));
    auto bb = m->add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}), {b});
    auto sum = m->add_instruction(make_op("add"), {x, bb});
    auto t = m->add_instruction(make_op("transpose"), {x});
    auto tb = m->add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 3, 2})}}), {t});
    m->add_return({sum, tb});
    auto bv = test::make_argument(fshape({3}), {10, 20, 30});
    // x + b; np.broadcast_to(x.T, (2,3,2))
    expect_outputs(p, {{"x", iota(fshape({2, 3}))}, {"b", bv}},
                   {{{2, 3}, {10, 21, 32, 13, 24, 35}}, {{2, 3, 2}, {0, 3, 1, 4, 2, 5, 0, 3, 1, 4, 2, 5}}});
}

TEST(ops_broadcast, rejects_incompatible_lens) {
    expect_shape_error(make_op("broadcast", value_map{{"out_lens", ints({3})}}), {fshape({2, 3})}, "of lower rank");
    expect_shape_error(make_op("broadcast", value_map{{"out_lens", ints({2, 4})}}), {fshape({2, 3})},
                       "expected 1 or 4");
}

// ---- slice ----

namespace {
operation slice_op(std::initializer_list<std::int64_t> axes, std::initializer_list<std::int64_t> starts,
                   std::initializer_list<std::int64_t> ends, std::initializer_list<std::int64_t> steps = {}) {
    return make_op(
        "slice",
        value_map{{"axes", ints(axes)}, {"starts", ints(starts)}, {"ends", ints(ends)}, {"steps", ints(steps)}});
}
constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
}  // namespace

TEST(ops_slice, clamps_negative_and_out_of_range_bounds_like_onnx) {
    shape x = fshape({3, 4});
    // np.arange(12).reshape(3,4)[-2:100, -3:-1]
    expect_unary(slice_op({0, 1}, {-2, -3}, {100, -1}), x, {{2, 2}, {5, 6, 9, 10}});
    // [:, 1::2] with ends = INT64_MAX
    expect_unary(slice_op({1}, {1}, {big}, {2}), x, {{3, 2}, {1, 3, 5, 7, 9, 11}});
    // axes default to the first dims: [1:2]
    expect_unary(slice_op({}, {1}, {2}), x, {{1, 4}, {4, 5, 6, 7}});
    // a negative axis: [:, 0:1]
    expect_unary(slice_op({-1}, {0}, {1}), x, {{3, 1}, {0, 4, 8}});
    // np.arange(10)[1:9:3]
    expect_unary(slice_op({0}, {1}, {9}, {3}), fshape({10}), {{3}, {1, 4, 7}});
    // very negative starts clamp to 0
    expect_unary(slice_op({0}, {std::numeric_limits<std::int64_t>::min()}, {1}), fshape({10}), {{1}, {0}});
}

TEST(ops_slice, empty_ranges_give_empty_tensors) {
    shape x = fshape({3, 4});
    expect_unary(slice_op({1}, {3}, {1}), x, {{3, 0}, {}});
    expect_unary(slice_op({1}, {10}, {big}), x, {{3, 0}, {}});
}

TEST(ops_slice, of_a_transpose_and_feeding_elementwise) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({3, 4}));
    auto t = m->add_instruction(make_op("transpose"), {x});
    auto s = m->add_instruction(slice_op({0, 1}, {1, 0}, {4, 3}, {2, 2}), {t});
    auto sq = m->add_instruction(make_op("mul"), {s, s});
    m->add_return({s, sq});
    // np.arange(12).reshape(3,4).T[1:4:2, 0:3:2]
    expect_outputs(p, {{"x", iota(fshape({3, 4}))}}, {{{2, 2}, {1, 9, 3, 11}}, {{2, 2}, {1, 81, 9, 121}}});
}

TEST(ops_slice, compute_alias_only_offsets_the_pointer) {
    auto op = slice_op({0, 1}, {1, 1}, {3, 4});
    shape in = fshape({3, 4});
    shape out = op.compute_shape({in});
    EXPECT_EQ(out, (shape{dtype::float_type, {2, 3}, {4, 1}}));
    EXPECT_EQ(op.output_alias({in}), 0);
    // Never dereferenced: an address no buffer lives at.
    auto* fake = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 40);
    argument view = op.compute_alias(out, {argument(in, fake)});
    EXPECT_EQ(view.data() - fake, (1 * 4 + 1) * 4);
    EXPECT_EQ(view.get_shape(), out);
}

TEST(ops_slice, rejects_bad_attributes) {
    shape x = fshape({3, 4});
    expect_shape_error(slice_op({0}, {2}, {0}, {-1}), {x}, "negative steps are not supported yet");
    expect_shape_error(slice_op({0}, {0}, {2}, {0}), {x}, "steps[0] is 0");
    expect_shape_error(slice_op({0}, {0, 1}, {2}), {x}, "must have the same length");
    expect_shape_error(slice_op({0, 1}, {0}, {2}), {x}, "must have the same length");
    expect_shape_error(slice_op({0}, {0}, {2}, {1, 1}), {x}, "must have the same length");
    expect_shape_error(slice_op({2}, {0}, {2}), {x}, "axis 2 is out of range");
    expect_shape_error(slice_op({1, -1}, {0, 0}, {2, 2}), {x}, "more than once");
}

// ---- concat ----

TEST(ops_concat, joins_any_number_of_inputs) {
    program p;
    module* m = p.get_main_module();
    auto a = m->add_parameter("a", fshape({2, 3}));
    auto b = m->add_parameter("b", fshape({2, 2}));
    auto c = m->add_parameter("c", fshape({2, 1}));
    auto y = m->add_parameter("y", fshape({3, 2}));
    auto abc = m->add_instruction(make_op("concat", value_map{{"axis", 1}}), {a, b, c});
    auto yt = m->add_instruction(make_op("transpose"), {y});
    auto ay = m->add_instruction(make_op("concat", value_map{{"axis", -2}}), {a, yt});
    auto single = m->add_instruction(make_op("concat", value_map{{"axis", 0}}), {c});
    m->add_return({abc, ay, single});
    auto bv = test::make_argument(fshape({2, 2}), {10, 11, 12, 13});
    auto cv = test::make_argument(fshape({2, 1}), {20, 21});
    // np.concatenate([a, b, c], axis=1); np.concatenate([a, y.T], axis=0)
    expect_outputs(p, {{"a", iota(fshape({2, 3}))}, {"b", bv}, {"c", cv}, {"y", iota(fshape({3, 2}))}},
                   {{{2, 6}, {0, 1, 2, 10, 11, 20, 3, 4, 5, 12, 13, 21}},
                    {{4, 3}, {0, 1, 2, 3, 4, 5, 0, 2, 4, 1, 3, 5}},
                    {{2, 1}, {20, 21}}});
}

TEST(ops_concat, rejects_mismatched_inputs) {
    auto op = make_op("concat", value_map{{"axis", 1}});
    expect_shape_error(op, {}, "at least 1 input");
    expect_shape_error(op, {fshape({2, 3}), shape{dtype::int32_type, {2, 3}}}, "dtype", error_kind::type_error);
    expect_shape_error(op, {fshape({2, 3}), fshape({3, 3})}, "may differ only in axis 1");
    expect_shape_error(op, {fshape({2, 3}), fshape({2, 3, 1})}, "may differ only in axis 1");
    expect_shape_error(op, {fshape({2})}, "axis 1 is out of range for rank 1");
}

// ---- squeeze / unsqueeze ----

TEST(ops_squeeze, removes_all_or_given_unit_dims) {
    expect_unary(make_op("squeeze"), fshape({1, 3, 1}), {{3}, {0, 1, 2}});
    expect_unary(make_op("squeeze", value_map{{"axes", ints({-1})}}), fshape({1, 3, 1}), {{1, 3}, {0, 1, 2}});
}

TEST(ops_squeeze, of_a_column_slice_is_a_strided_view) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({3, 4}));
    auto col = m->add_instruction(slice_op({1}, {2}, {3}), {x});
    auto v = m->add_instruction(make_op("squeeze", value_map{{"axes", ints({1})}}), {col});
    EXPECT_EQ(v->get_shape(), (shape{dtype::float_type, {3}, {4}}));
    auto neg = m->add_instruction(make_op("neg"), {v});
    m->add_return({v, neg});
    // np.arange(12).reshape(3,4)[:, 2]
    expect_outputs(p, {{"x", iota(fshape({3, 4}))}}, {{{3}, {2, 6, 10}}, {{3}, {-2, -6, -10}}});
}

TEST(ops_squeeze, rejects_dims_that_are_not_one) {
    expect_shape_error(make_op("squeeze", value_map{{"axes", ints({1})}}), {fshape({1, 3})},
                       "cannot squeeze axis 1 of input {1, 3}: its extent is 3, not 1");
    expect_shape_error(make_op("squeeze", value_map{{"axes", ints({2})}}), {fshape({1, 3})}, "out of range");
}

TEST(ops_unsqueeze, inserts_unit_dims_at_output_positions) {
    auto op = make_op("unsqueeze", value_map{{"axes", ints({0, -1})}});
    shape out = op.compute_shape({fshape({2, 3})});
    EXPECT_EQ(out.lens(), (lens_t{1, 2, 3, 1}));
    EXPECT_TRUE(out.standard());
    expect_unary(op, fshape({2, 3}), {{1, 2, 3, 1}, range(0, 6)});
}

TEST(ops_unsqueeze, of_a_transpose) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({2, 3}));
    auto t = m->add_instruction(make_op("transpose"), {x});
    auto u = m->add_instruction(make_op("unsqueeze", value_map{{"axes", ints({1})}}), {t});
    m->add_return({u});
    expect_outputs(p, {{"x", iota(fshape({2, 3}))}}, {{{3, 1, 2}, {0, 3, 1, 4, 2, 5}}});
}

TEST(ops_unsqueeze, rejects_bad_axes) {
    expect_shape_error(make_op("unsqueeze", value_map{{"axes", ints({0, -3})}}), {fshape({2})}, "more than once");
    expect_shape_error(make_op("unsqueeze", value_map{{"axes", ints({3})}}), {fshape({2, 3})},
                       "axis 3 is out of range for rank 3");
}

// ---- flatten ----

TEST(ops_flatten, splits_dims_at_axis) {
    shape in = fshape({2, 3, 4});
    auto with = [](std::int64_t a) { return make_op("flatten", value_map{{"axis", a}}); };
    EXPECT_EQ(make_op("flatten").compute_shape({in}), fshape({2, 12}));
    EXPECT_EQ(with(0).compute_shape({in}), fshape({1, 24}));
    EXPECT_EQ(with(-1).compute_shape({in}), fshape({6, 4}));
    EXPECT_EQ(with(3).compute_shape({in}), fshape({24, 1}));
    EXPECT_EQ(make_op("flatten").output_alias({in}), 0);
    expect_unary(make_op("flatten"), in, {{2, 12}, range(0, 24)});
}

TEST(ops_flatten, of_a_transposed_input_copies) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({2, 3}));
    auto t = m->add_instruction(make_op("transpose"), {x});
    auto f = make_op("flatten", value_map{{"axis", 0}});
    EXPECT_EQ(f.output_alias({t->get_shape()}), -1);
    m->add_return({m->add_instruction(f, {t})});
    expect_outputs(p, {{"x", iota(fshape({2, 3}))}}, {{{1, 6}, {0, 3, 1, 4, 2, 5}}});
}

TEST(ops_flatten, rejects_axis_out_of_range) {
    expect_shape_error(make_op("flatten", value_map{{"axis", 4}}), {fshape({2, 3, 4})}, "axis 4 is out of range");
    expect_shape_error(make_op("flatten", value_map{{"axis", -4}}), {fshape({2, 3, 4})}, "valid: -3 to 3");
}

// ---- split ----

namespace {
operation split_op(std::int64_t axis, std::initializer_list<std::int64_t> sizes, std::int64_t num_outputs,
                   std::int64_t output) {
    return make_op("split",
                   value_map{{"axis", axis}, {"sizes", ints(sizes)}, {"num_outputs", num_outputs}, {"output", output}});
}
}  // namespace

TEST(ops_split, yields_each_piece_as_a_view) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({2, 4}));
    auto first = m->add_instruction(split_op(-1, {1, 3}, 0, 0), {x});
    auto second = m->add_instruction(split_op(1, {1, 3}, 2, 1), {x});
    auto sum = m->add_instruction(make_op("add"), {first, second});
    m->add_return({first, second, sum});
    // np.split(x, [1], axis=1); first + second broadcasts
    expect_outputs(p, {{"x", iota(fshape({2, 4}))}},
                   {{{2, 1}, {0, 4}}, {{2, 3}, {1, 2, 3, 5, 6, 7}}, {{2, 3}, {1, 2, 3, 9, 10, 11}}});
}

TEST(ops_split, equal_pieces_of_a_transpose) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({2, 4}));
    auto t = m->add_instruction(make_op("transpose"), {x});
    m->add_return({m->add_instruction(split_op(0, {}, 2, 1), {t})});
    // np.split(np.arange(8).reshape(2,4).T, 2, axis=0)[1]
    expect_outputs(p, {{"x", iota(fshape({2, 4}))}}, {{{2, 2}, {2, 6, 3, 7}}});
}

TEST(ops_split, rejects_bad_pieces) {
    shape x = fshape({2, 4});
    expect_shape_error(split_op(1, {1, 2}, 0, 0), {x}, "sum to 3 but axis 1");
    expect_shape_error(split_op(1, {1, 3}, 0, 2), {x}, "output 2 is out of range: there are 2 pieces");
    expect_shape_error(split_op(1, {}, 3, 0), {x}, "does not split into 3 equal pieces");
    expect_shape_error(split_op(1, {}, 0, 0), {x}, "give `sizes` or a `num_outputs` >= 1");
    expect_shape_error(split_op(1, {-1, 5}, 0, 0), {x}, "negative entry");
    expect_shape_error(split_op(1, {1, 3}, 3, 0), {x}, "disagrees");
    expect_shape_error(split_op(2, {1, 3}, 0, 0), {x}, "axis 2 is out of range");
}

// ---- contiguous ----

TEST(ops_contiguous, copies_any_layout_into_standard_strides) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({2, 3}));
    auto t = m->add_instruction(make_op("transpose"), {x});
    auto c = m->add_instruction(make_op("contiguous"), {t});
    EXPECT_EQ(c->get_shape(), fshape({3, 2}));
    auto b = m->add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 2, 3})}}), {x});
    auto cb = m->add_instruction(make_op("contiguous"), {b});
    m->add_return({c, cb});
    expect_outputs(p, {{"x", iota(fshape({2, 3}))}},
                   {{{3, 2}, {0, 3, 1, 4, 2, 5}}, {{2, 2, 3}, {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}}});
}

// ---- pad ----

namespace {
operation pad_op(std::initializer_list<std::int64_t> pads, const char* mode, double v = 0.0) {
    return make_op("pad", value_map{{"pads", ints(pads)}, {"mode", mode}, {"value", v}});
}
}  // namespace

TEST(ops_pad, constant_reflect_and_edge_modes) {
    shape x = fshape({2, 3});
    // np.pad(x, ((1,0),(0,2)), constant_values=9)
    expect_unary(pad_op({1, 0, 0, 2}, "constant", 9), x, {{3, 5}, {9, 9, 9, 9, 9, 0, 1, 2, 9, 9, 3, 4, 5, 9, 9}});
    // np.pad(x, ((0,1),(2,2)), mode='reflect')
    expect_unary(pad_op({0, 2, 1, 2}, "reflect"), x,
                 {{3, 7}, {2, 1, 0, 1, 2, 1, 0, 5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0}});
    // np.pad(x, ((1,1),(0,2)), mode='edge')
    expect_unary(pad_op({1, 0, 1, 2}, "edge"), x,
                 {{4, 5}, {0, 1, 2, 2, 2, 0, 1, 2, 2, 2, 3, 4, 5, 5, 5, 3, 4, 5, 5, 5}});
}

TEST(ops_pad, reads_transposed_input_and_keeps_integer_dtype) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({2, 3}));
    auto t = m->add_instruction(make_op("transpose"), {x});
    auto padded = m->add_instruction(pad_op({1, 1, 0, 1}, "edge"), {t});
    auto i = m->add_parameter("i", shape{dtype::int32_type, {2}});
    auto pi = m->add_instruction(pad_op({1, 2}, "constant", -7), {i});
    EXPECT_EQ(pi->get_shape().type(), dtype::int32_type);
    m->add_return({padded, pi});
    auto iv = test::make_argument(shape{dtype::int32_type, {2}}, {4, 5});
    // np.pad(x.T, ((1,0),(1,1)), mode='edge')
    expect_outputs(p, {{"x", iota(fshape({2, 3}))}, {"i", iv}},
                   {{{4, 4}, {0, 0, 3, 3, 0, 0, 3, 3, 1, 1, 4, 4, 2, 2, 5, 5}}, {{5}, {-7, 4, 5, -7, -7}}});
}

TEST(ops_pad, mode_round_trips_through_attributes) {
    auto op = pad_op({0, 1}, "reflect");
    const value attributes = op.attributes();  // find points into it: keep it alive
    const value* mode = attributes.find("mode");
    ASSERT_NE(mode, nullptr);
    EXPECT_EQ(mode->as_string(), "reflect");
    EXPECT_NE(to_string(op).find("reflect"), std::string::npos) << to_string(op);
    EXPECT_NE(op, pad_op({0, 1}, "edge"));
}

TEST(ops_pad, rejects_bad_pads_and_modes) {
    shape x = fshape({2, 3});
    expect_shape_error(pad_op({1, 1}, "constant"), {x}, "needs 4");
    expect_shape_error(pad_op({0, -1, 0, 0}, "constant"), {x}, "pads[1] = -1 is negative");
    expect_shape_error(pad_op({0, 3, 0, 0}, "reflect"), {x}, "reflect mode needs pads smaller");
    expect_shape_error(pad_op({2, 0, 0, 0}, "reflect"), {x}, "dim 0");
    expect_shape_error(pad_op({1, 0, 0, 0}, "edge"), {fshape({0, 3})}, "it is empty");
    try {
        pad_op({0, 0}, "wrap");
        ADD_FAILURE() << "expected an error for mode 'wrap'";
    } catch (const error& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("pad"), std::string::npos) << what;
        EXPECT_NE(what.find("'wrap' is not one of: constant, reflect, edge"), std::string::npos) << what;
    }
}

// ---- chains of views over intermediates and literals ----

TEST(ops_shape_views, chain_over_an_intermediate_keeps_it_alive) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({3, 4}));
    auto y = m->add_instruction(make_op("add"), {x, x});
    auto t = m->add_instruction(make_op("transpose"), {y});
    auto s = m->add_instruction(slice_op({0}, {1}, {3}), {t});
    auto z = m->add_instruction(make_op("mul"), {s, s});
    m->add_return({z, t});
    // y = 2x; s = y.T[1:3] = [[2,10,18],[4,12,20]]
    expect_outputs(p, {{"x", iota(fshape({3, 4}))}},
                   {{{2, 3}, {4, 100, 324, 16, 144, 400}}, {{4, 3}, {0, 8, 16, 2, 10, 18, 4, 12, 20, 6, 14, 22}}});
}

TEST(ops_shape_views, of_a_literal_returned_directly) {
    program p;
    module* m = p.get_main_module();
    auto c = m->add_literal(literal(fshape({2, 3}), std::vector<float>{1, 2, 3, 4, 5, 6}));
    auto t = m->add_instruction(make_op("transpose"), {c});
    auto u = m->add_instruction(make_op("unsqueeze", value_map{{"axes", ints({0})}}), {t});
    auto s = m->add_instruction(slice_op({2}, {1}, {2}), {u});
    m->add_return({u, s});
    expect_outputs(p, {}, {{{1, 3, 2}, {1, 4, 2, 5, 3, 6}}, {{1, 3, 1}, {4, 5, 6}}});
}

TEST(ops_shape_views, cpu_rebinds_parameter_views_on_every_run) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", fshape({3, 4}));
    auto s = m->add_instruction(slice_op({0, 1}, {1, 2}, {3, 4}), {x});
    auto y = m->add_instruction(make_op("add"), {s, s});
    m->add_return({y, s});
    p.compile(get_target("cpu"));
    for (double scale : {1.0, 3.0}) {
        std::vector<float> v(12);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(scale * static_cast<double>(i));
        auto out = p.eval({{"x", test::make_argument(fshape({3, 4}), v)}});
        ASSERT_EQ(out.size(), 2u);
        // scale * np.arange(12).reshape(3,4)[1:3, 2:4] = scale * [6, 7, 10, 11]
        values_t s_expected{6 * scale, 7 * scale, 10 * scale, 11 * scale};
        values_t y_expected;
        for (double e : s_expected) y_expected.push_back(2 * e);
        EXPECT_EQ(out[1].to_vector<double>(), s_expected) << "scale " << scale;
        EXPECT_EQ(out[0].to_vector<double>(), y_expected) << "scale " << scale;
    }
}

TEST(ops_shape_views, returning_a_value_and_a_view_of_it_in_either_order) {
    for (bool view_first : {false, true}) {
        program p;
        module* m = p.get_main_module();
        auto x = m->add_parameter("x", fshape({2, 3}));
        auto y = m->add_instruction(make_op("add"), {x, x});
        auto same = m->add_instruction(make_op("reshape", value_map{{"dims", ints({2, 3})}}), {y});
        auto t = m->add_instruction(make_op("transpose"), {y});
        if (view_first)
            m->add_return({same, t, y});
        else
            m->add_return({y, t, same});
        expected_output ye{{2, 3}, {0, 2, 4, 6, 8, 10}};
        expect_outputs(p, {{"x", iota(fshape({2, 3}))}}, {ye, {{3, 2}, {0, 6, 2, 8, 4, 10}}, ye});
        // The value and its same-shaped view must come back in separate buffers.
        auto out = test::run_on(p, "cpu", {{"x", iota(fshape({2, 3}))}});
        EXPECT_NE(out[0].data(), out[2].data()) << "view_first " << view_first;
    }
}
