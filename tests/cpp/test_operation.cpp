#include <gtest/gtest.h>

#include "kiln/kiln.hpp"

using namespace kiln;

TEST(operation, attributes_come_from_one_declaration) {
    operation op = make_op("mod", value_map{{"fmod", true}});
    EXPECT_EQ(op.name(), "mod");
    EXPECT_EQ(to_string(op), "mod[fmod=true]");
    const value attrs = op.attributes();
    ASSERT_TRUE(attrs.is_map());
    ASSERT_EQ(attrs.as_map().size(), 1u);
    EXPECT_EQ(attrs.as_map()[0].first, "fmod");
    EXPECT_EQ(attrs.as_map()[0].second, value(true));
    // Equality and hashing follow the attributes.
    EXPECT_EQ(op, make_op("mod", value_map{{"fmod", true}}));
    EXPECT_NE(op, make_op("mod"));
    EXPECT_EQ(op.hash(), make_op("mod", value_map{{"fmod", 1}}).hash());
    EXPECT_NE(make_op("add"), make_op("sub"));
}

TEST(operation, dtype_attributes_parse_from_strings) {
    operation op = make_op("convert", value_map{{"target_type", "int8"}});
    EXPECT_EQ(to_string(op), "convert[target_type=\"int8_type\"]");
    EXPECT_EQ(op.compute_shape({shape{dtype::float_type, {2}}}), (shape{dtype::int8_type, {2}}));
}

TEST(operation, unknown_op_and_bad_attributes_are_clear_errors) {
    try {
        make_op("relux");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::not_implemented);
        EXPECT_NE(std::string(e.what()).find("'relux'"), std::string::npos) << e.what();
    }
    try {
        make_op("mod", value_map{{"fmode", true}});
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("no attribute 'fmode'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("fmod"), std::string::npos) << e.what();
    }
    try {
        make_op("convert", value_map{{"target_type", 3.5}});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::type_error);
        EXPECT_NE(std::string(e.what()).find("'target_type'"), std::string::npos) << e.what();
    }
    try {
        make_op("add", value_map{{"axis", 1}});
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("takes none"), std::string::npos) << e.what();
    }
}

TEST(operation, registry_lists_user_ops_only) {
    auto names = get_operators();
    EXPECT_NE(std::find(names.begin(), names.end(), "add"), names.end());
    EXPECT_EQ(std::find(names.begin(), names.end(), "@param"), names.end());
    for (const auto& n : names) EXPECT_EQ(make_op(n).name(), n);
}

TEST(value, conversions_and_text) {
    value v = value_list{1, 2, 3};
    EXPECT_EQ(to_string(v), "{1, 2, 3}");
    EXPECT_THROW(value("x").as_int(), error);
    EXPECT_EQ(value(2.0).as_int(), 2);
    EXPECT_THROW(value(2.5).as_int(), error);
    EXPECT_EQ(hash_value(value_list{1, 2}), hash_value(value_list{1, 2}));
    EXPECT_NE(hash_value(value_list{1, 2}), hash_value(value_list{2, 1}));
}
