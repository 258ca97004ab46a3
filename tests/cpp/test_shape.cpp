#include <gtest/gtest.h>

#include "kiln/kiln.hpp"

using namespace kiln;

TEST(shape, standard_shape_counts) {
    shape s{dtype::float_type, {2, 3, 4}};
    EXPECT_EQ(s.strides(), (std::vector<std::size_t>{12, 4, 1}));
    EXPECT_EQ(s.elements(), 24u);
    EXPECT_EQ(s.bytes(), 96u);
    EXPECT_TRUE(s.standard());
    EXPECT_TRUE(s.packed());
    EXPECT_FALSE(s.transposed());
    EXPECT_FALSE(s.broadcasted());
    EXPECT_FALSE(s.scalar());
}

TEST(shape, transposed_shape) {
    shape s{dtype::half_type, {4, 3}, {1, 4}};
    EXPECT_FALSE(s.standard());
    EXPECT_TRUE(s.transposed());
    EXPECT_EQ(s.bytes(), 24u);
    // Row-major element 1 is (0, 1), which lives at offset 4.
    EXPECT_EQ(s.index(1), 4u);
    EXPECT_EQ(s.index(std::vector<std::size_t>{2, 1}), 6u);
    EXPECT_EQ(s.multi(5), (std::vector<std::size_t>{1, 2}));
}

TEST(shape, broadcast_and_scalar_shapes) {
    shape b{dtype::float_type, {3, 4}, {0, 1}};
    EXPECT_TRUE(b.broadcasted());
    EXPECT_FALSE(b.standard());
    EXPECT_FALSE(b.transposed());
    EXPECT_EQ(b.elements(), 12u);
    EXPECT_EQ(b.bytes(), 16u);  // memory spans one row
    shape s{dtype::float_type, {2, 2}, {0, 0}};
    EXPECT_TRUE(s.scalar());
    EXPECT_EQ(s.bytes(), 4u);
    shape rank0{dtype::int32_type};
    EXPECT_TRUE(rank0.scalar());
    EXPECT_TRUE(rank0.standard());
    EXPECT_EQ(rank0.elements(), 1u);
    EXPECT_EQ(rank0.bytes(), 4u);
}

TEST(shape, empty_and_unit_dims) {
    shape e{dtype::float_type, {2, 0, 3}};
    EXPECT_EQ(e.elements(), 0u);
    EXPECT_EQ(e.bytes(), 0u);
    shape ones{dtype::float_type, {1, 5, 1}, {7, 1, 99}};  // strides of unit dims do not matter
    EXPECT_TRUE(ones.packed());
}

TEST(shape, equality_and_text) {
    shape a{dtype::float_type, {3, 4}};
    EXPECT_EQ(a, (shape{dtype::float_type, {3, 4}, {4, 1}}));
    EXPECT_NE(a, (shape{dtype::double_type, {3, 4}}));
    EXPECT_NE(a, (shape{dtype::float_type, {3, 4}, {1, 3}}));
    EXPECT_EQ(to_string(a), "float_type, {3, 4}, {4, 1}");
    EXPECT_THROW((shape{dtype::float_type, {3, 4}, {1}}), error);
}

TEST(argument, allocation_beyond_physical_memory_is_a_clear_error) {
    shape huge{dtype::float_type, {std::size_t{1} << 20, std::size_t{1} << 20, 1024}};  // 4 PiB
    try {
        argument a(huge);
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot allocate"), std::string::npos) << e.what();
    }
}
