// A compiled cpu program's packed weights are saved packed (format 3) and a
// load on the same machine and Kiln version reads them in place: nothing is
// packed on load, the outputs are bit-identical, and the literals' values
// stay available (restored from the packed bytes) for printing and saving.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {

// x [16, 64] times w [64, 256]: rows 1 KiB apart, which the matmul kernel
// copies with padded rows; then times v [256, 40], which oneDNN may pack.
// (Sixteen rows: up to eight would run Kiln's few-row loop, which packs nothing.)
program two_products(argument& w, argument& v) {
    w = generate_argument(shape{dtype::float_type, {64, 256}}, 5);
    v = generate_argument(shape{dtype::float_type, {256, 40}}, 6);
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", shape{dtype::float_type, {16, 64}});
    auto h = m->add_instruction(make_op("dot"), {x, m->add_literal(literal(w))});
    m->add_return({m->add_instruction(make_op("dot"), {h, m->add_literal(literal(v))})});
    return p;
}

parameter_map inputs() {
    return {{"x", generate_argument(shape{dtype::float_type, {16, 64}}, 9)}};
}

void expect_identical(const argument& a, const argument& b) {
    ASSERT_EQ(a.get_shape(), b.get_shape());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.get_shape().bytes()), 0);
}

std::filesystem::path temp_path(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("kiln_test_packed_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST(serialize_packed, a_loaded_program_reads_its_packed_weights_in_place) {
    argument w, v;
    program p = two_products(w, v);
    p.compile(get_target("cpu"));
    ASSERT_GT(p.kernel_constant_bytes(), 0u) << "the kernels packed nothing: the test needs packed weights";
    const auto expected = p.eval(inputs());
    const std::string image = save_buffer(p);
    EXPECT_EQ(image[8], 3);
    const auto path = temp_path("in_place.kiln");
    std::ofstream(path, std::ios::binary).write(image.data(), static_cast<std::streamsize>(image.size()));

    program loaded = load(path.string());
    EXPECT_EQ(loaded.kernel_constant_bytes(), 0u);  // nothing packed (reordered) on load
    EXPECT_EQ(loaded.adopted_constant_bytes(), p.kernel_constant_bytes());
    expect_identical(loaded.eval(inputs()).at(0), expected.at(0));

    // The literals' values are still the weights (restored from the packed bytes).
    std::vector<argument> literals;
    for (const auto& ins : *loaded.get_main_module())
        if (ins.is_literal()) literals.push_back(ins.get_literal().get_argument());
    ASSERT_EQ(literals.size(), 2u);
    expect_identical(literals[0], w);
    expect_identical(literals[1], v);
    EXPECT_EQ(save_buffer(loaded), image);
    std::filesystem::remove(path);
}

TEST(serialize_packed, a_packed_literal_has_no_values_until_a_target_restores_them) {
    auto form = std::make_shared<packed_constant>();
    form->bytes = argument(shape{dtype::uint8_type, {64}});
    const literal lit = literal::packed(shape{dtype::float_type, {4, 4}}, form);
    EXPECT_FALSE(lit.holds_bytes());
    EXPECT_EQ(lit.packed_form(), form);
    try {
        lit.get_argument();
        FAIL() << "expected an error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("not available until the program is lowered"), std::string::npos)
            << e.what();
    }
}
