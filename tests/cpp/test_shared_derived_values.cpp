// shared_derived_value: one derived buffer per source buffer and derivation
// while programs hold it; a new source, another derivation or a released
// value derives again.
#include <gtest/gtest.h>

#include <optional>

#include "passes/shared_derived_values.hpp"

using namespace kiln;

namespace {

argument filled(std::size_t n, float v) {
    argument a(shape{dtype::float_type, {n}});
    for (std::size_t i = 0; i < n; ++i) a.data_as<float>()[i] = v + static_cast<float>(i);
    return a;
}

}  // namespace

TEST(shared_derived_values, one_buffer_for_one_source_and_derivation_while_it_is_held) {
    const argument source = filled(8, 1);
    int derived = 0;
    auto doubled = [&] {
        ++derived;
        argument out = filled(8, 0);
        for (std::size_t i = 0; i < 8; ++i) out.data_as<float>()[i] = 2 * source.data_as<float>()[i];
        return out;
    };
    std::optional<argument> first = shared_derived_value(source, "double", doubled);
    const argument second = shared_derived_value(source, "double", doubled);
    EXPECT_EQ(derived, 1);
    EXPECT_EQ(first->data(), second.data());
    EXPECT_EQ(second.data_as<float>()[3], 8.0f);
    // Another derivation of the same source is its own value.
    const argument other = shared_derived_value(source, "double again", doubled);
    EXPECT_EQ(derived, 2);
    EXPECT_NE(other.data(), second.data());
}

TEST(shared_derived_values, a_released_value_or_another_source_is_derived_again) {
    int derived = 0;
    auto copy_of = [&](const argument& a) {
        return [&derived, a] {
            ++derived;
            return a.contiguous();
        };
    };
    const argument source = filled(4, 5);
    {
        const argument held = shared_derived_value(source, "copy", copy_of(source));
        EXPECT_EQ(derived, 1);
    }
    // Nobody holds the derived buffer any more: it is derived again.
    const argument again = shared_derived_value(source, "copy", copy_of(source));
    EXPECT_EQ(derived, 2);
    // A buffer of the same values elsewhere is another source.
    const argument twin = filled(4, 5);
    const argument from_twin = shared_derived_value(twin, "copy", copy_of(twin));
    EXPECT_EQ(derived, 3);
    EXPECT_NE(from_twin.data(), again.data());
    // A source without an owner (a view of someone's memory) is never cached.
    const argument view(source.get_shape(), const_cast<std::byte*>(source.data()));
    shared_derived_value(view, "copy", copy_of(view));
    shared_derived_value(view, "copy", copy_of(view));
    EXPECT_EQ(derived, 5);
}
