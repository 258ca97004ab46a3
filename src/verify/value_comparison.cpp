// Element-wise comparison of two values within a tolerance.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "kiln/verify.hpp"

namespace kiln {

namespace {

// Adds the element-wise comparison of two tensors of equal dtype and lens to
// `c`, whose element count so far gives the index of their first element.
void compare_elements(const argument& got, const argument& expected, const tolerance& tol, value_comparison& c) {
    const double inf = std::numeric_limits<double>::infinity();
    const std::size_t n = got.get_shape().elements();
    for (std::size_t i = 0; i < n; ++i) {
        const double a = got.value_at(i), b = expected.value_at(i);
        bool ok = true;
        double abs_err = 0, rel_err = 0;
        if (std::isnan(a) || std::isnan(b)) {
            ok = std::isnan(a) && std::isnan(b);
            abs_err = rel_err = ok ? 0 : inf;
        } else if (a != b) {  // equal infinities need no arithmetic (inf - inf is NaN)
            abs_err = std::fabs(a - b);
            rel_err = b != 0 ? abs_err / std::fabs(b) : inf;
            ok = abs_err <= tol.atol + tol.rtol * std::fabs(b);
        }
        c.max_abs_error = std::max(c.max_abs_error, abs_err);
        c.max_rel_error = std::max(c.max_rel_error, rel_err);
        if (!ok && c.mismatches++ == 0) {
            c.first_mismatch = c.elements + i;
            c.got_at_first = a;
            c.expected_at_first = b;
        }
    }
    c.elements += n;
}

bool same_tensor_shape(const shape& a, const shape& b) {
    return !a.is_tuple() && !b.is_tuple() && a.type() == b.type() && a.lens() == b.lens();
}

}  // namespace

value_comparison compare_values(const argument& got, const argument& expected, const tolerance& tol) {
    value_comparison c;
    c.got_shape = got.get_shape();
    c.expected_shape = expected.get_shape();
    if (!c.got_shape.is_tuple() && !c.expected_shape.is_tuple()) {
        c.same_shape = same_tensor_shape(c.got_shape, c.expected_shape);
        if (c.same_shape) compare_elements(got, expected, tol, c);
        return c;
    }
    // Tuples element by element (the padding between elements is no value),
    // indices counting through the elements in order.
    const auto& got_parts = c.got_shape.sub_shapes();
    const auto& expected_parts = c.expected_shape.sub_shapes();
    c.same_shape = got_parts.size() == expected_parts.size();
    for (std::size_t i = 0; c.same_shape && i < got_parts.size(); ++i)
        c.same_shape = same_tensor_shape(got_parts[i], expected_parts[i]);
    if (!c.same_shape) return c;
    for (std::size_t i = 0; i < got_parts.size(); ++i)
        compare_elements(got.reshaped(got_parts[i], c.got_shape.tuple_offset(i)),
                         expected.reshaped(expected_parts[i], c.expected_shape.tuple_offset(i)), tol, c);
    return c;
}

std::string describe(const value_comparison& c) {
    std::ostringstream os;
    os.precision(3);
    if (!c.same_shape) {
        os << "MISMATCH: got " << to_string(c.got_shape.type()) << " " << to_string(c.got_shape.lens()) << ", expected "
           << to_string(c.expected_shape.type()) << " " << to_string(c.expected_shape.lens());
        return os.str();
    }
    os << "max abs error " << c.max_abs_error << ", max rel error " << c.max_rel_error;
    if (c.ok()) {
        os << ": ok";
    } else {
        // Enough digits to tell neighbouring values of the dtype apart.
        os.precision(c.got_shape.type() == dtype::double_type ? 17 : 9);
        os << ": MISMATCH in " << c.mismatches << " of " << c.elements << " elements (first at index "
           << c.first_mismatch << ": got " << c.got_at_first << ", expected " << c.expected_at_first << ")";
    }
    return os.str();
}

}  // namespace kiln
