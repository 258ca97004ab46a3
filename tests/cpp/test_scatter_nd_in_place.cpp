// scatter_nd_in_place: the updates land in the caller's buffer (the
// parameter's own memory, on ref and cpu), readers of the result see the new
// values, dead-code elimination keeps a write nothing reads, a second reader
// of the written input is a verifier error, and an out-of-range index
// raises before anything is written.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/op_registry.hpp"
#include "op_test_helpers.hpp"
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

const dtype f32 = dtype::float_type;
const dtype i64 = dtype::int64_type;

// A cache of 2 heads x 4 positions x 3 values, written at (head 0, position 1)
// and (head 1, position 3): indices [2, 1, 2], updates [2, 1, 3].
struct cache_write {
    program p;
    instruction_ref written;
};

cache_write program_writing_cache(bool read_result) {
    cache_write c;
    module* m = c.p.get_main_module();
    auto cache = m->add_parameter("cache", shape{f32, {2, 4, 3}});
    auto indices = m->add_parameter("indices", shape{i64, {2, 1, 2}});
    auto updates = m->add_parameter("updates", shape{f32, {2, 1, 3}});
    c.written = m->add_instruction(make_op("scatter_nd_in_place"), {cache, indices, updates});
    // Either the updated cache is read (negated), or only the updates are.
    m->add_return({m->add_instruction(make_op("neg"), {read_result ? c.written : updates})});
    return c;
}

argument zero_cache() { return make(f32, {2, 4, 3}, std::vector<double>(24, 0.0)); }

std::vector<double> written_cache() {
    std::vector<double> v(24, 0.0);
    for (int i = 0; i < 3; ++i) {
        v[(0 * 4 + 1) * 3 + i] = 1 + i;  // head 0, position 1
        v[(1 * 4 + 3) * 3 + i] = 4 + i;  // head 1, position 3
    }
    return v;
}

parameter_map feeds(const argument& cache, std::int64_t last_position = 3) {
    return {{"cache", cache},
            {"indices", make(i64, {2, 1, 2}, {0, 1, 1, static_cast<double>(last_position)})},
            {"updates", make(f32, {2, 1, 3}, {1, 2, 3, 4, 5, 6})}};
}

program compiled_for(const program& p, const std::string& target) {
    program copy = p;
    compile_options options;
    options.verify_passes = true;
    copy.compile(get_target(target), options);
    return copy;
}

}  // namespace

TEST(scatter_nd_in_place, writes_the_callers_buffer_and_readers_see_the_new_values) {
    for (const std::string target : {"ref", "cpu"}) {
        program compiled = compiled_for(program_writing_cache(true).p, target);
        argument cache = zero_cache();
        const std::byte* memory = cache.data();
        auto out = compiled.eval(feeds(cache));
        ASSERT_EQ(cache.data(), memory);
        expect_values(cache, {2, 4, 3}, written_cache(), 0, target + ": the caller's cache");
        std::vector<double> negated = written_cache();
        for (auto& v : negated) v = -v;
        expect_values(out.at(0), {2, 4, 3}, negated, 0, target + ": the reader of the written cache");
    }
}

TEST(scatter_nd_in_place, is_kept_when_nothing_reads_its_result) {
    cache_write c = program_writing_cache(false);
    module optimized = after_pass<dead_code_elimination>(*c.p.get_main_module());
    EXPECT_EQ(count_ops(optimized, "scatter_nd_in_place"), 1u);
    for (const std::string target : {"ref", "cpu"}) {
        program compiled = compiled_for(c.p, target);
        argument cache = zero_cache();
        compiled.eval(feeds(cache));
        expect_values(cache, {2, 4, 3}, written_cache(), 0, target + ": the caller's cache");
    }
}

TEST(scatter_nd_in_place, a_second_reader_of_the_written_input_is_a_verifier_error) {
    module m;
    auto cache = m.add_parameter("cache", shape{f32, {2, 4, 3}});
    auto indices = m.add_parameter("indices", shape{i64, {2, 1, 2}});
    auto updates = m.add_parameter("updates", shape{f32, {2, 1, 3}});
    auto written = m.add_instruction(make_op("scatter_nd_in_place"), {cache, indices, updates});
    auto old_values = m.add_instruction(make_op("relu"), {cache});
    m.add_return({written, old_values});
    try {
        verify_module(m);
        FAIL() << "the verifier accepted a second reader of the written cache";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("it must be the only one"), std::string::npos) << e.what();
    }
}

TEST(scatter_nd_in_place, an_out_of_range_index_raises_and_writes_nothing) {
    for (const std::string target : {"ref", "cpu"}) {
        program compiled = compiled_for(program_writing_cache(true).p, target);
        argument cache = zero_cache();
        try {
            compiled.eval(feeds(cache, 4));
            FAIL() << target << ": position 4 of 4 was accepted";
        } catch (const error& e) {
            EXPECT_EQ(e.kind(), error_kind::out_of_range) << e.what();
            EXPECT_NE(std::string(e.what()).find("index 4 is out of range"), std::string::npos) << e.what();
        }
        expect_values(cache, {2, 4, 3}, std::vector<double>(24, 0.0), 0, target + ": the untouched cache");
    }
}

TEST(scatter_nd_in_place, needs_standard_strided_data) {
    expect_shape_error(make_op("scatter_nd_in_place"),
                       {shape{f32, {3, 2}, {1, 3}}, shape{i64, {1, 1}}, shape{f32, {1, 2}}},
                       {"scatter_nd_in_place", "standard-strided"});
}
