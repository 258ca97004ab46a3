#pragma once
// Conversion of declared op attributes to and from `value`.
//
// An op struct lists its attributes once:
//     template <class Self, class F>
//     static void reflect(Self& self, F&& f) { f(self.axis, "axis"); f(self.keepdims, "keepdims"); }
// Supported attribute types: bool, integers, floating point, std::string,
// dtype, shape, enums that have an `enum_names(E)` overload, and std::vector
// of any of these.
#include <array>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/shape.hpp"
#include "kiln/value.hpp"

namespace kiln {

template <class T>
struct is_std_vector : std::false_type {};
template <class T, class A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};

value attribute_to_value(const shape& s);
void attribute_from_value(const value& v, shape& s);

template <class T>
value attribute_to_value(const T& x) {
    if constexpr (std::is_same_v<T, bool>) {
        return value(x);
    } else if constexpr (std::is_same_v<T, dtype>) {
        return value(to_string(x));
    } else if constexpr (std::is_enum_v<T>) {
        return value(std::string(enum_names(T{})[static_cast<std::size_t>(x)]));
    } else if constexpr (std::is_integral_v<T>) {
        return value(static_cast<std::int64_t>(x));
    } else if constexpr (std::is_floating_point_v<T>) {
        return value(static_cast<double>(x));
    } else if constexpr (std::is_same_v<T, std::string>) {
        return value(x);
    } else if constexpr (is_std_vector<T>::value) {
        value_list l;
        l.reserve(x.size());
        for (const auto& e : x) l.push_back(attribute_to_value(e));
        return value(std::move(l));
    } else {
        static_assert(sizeof(T) == 0, "unsupported attribute type");
    }
}

template <class T>
void attribute_from_value(const value& v, T& x) {
    if constexpr (std::is_same_v<T, bool>) {
        x = v.as_bool();
    } else if constexpr (std::is_same_v<T, dtype>) {
        x = parse_dtype(v.as_string());
    } else if constexpr (std::is_enum_v<T>) {
        const auto& names = enum_names(T{});
        const std::string& s = v.as_string();
        for (std::size_t i = 0; i < names.size(); ++i)
            if (s == names[i]) {
                x = static_cast<T>(i);
                return;
            }
        std::string known;
        for (const auto* n : names) known += (known.empty() ? "" : ", ") + std::string(n);
        fail(error_kind::invalid_argument, "'" + s + "' is not one of: " + known);
    } else if constexpr (std::is_integral_v<T>) {
        std::int64_t i = v.as_int();
        if constexpr (std::is_unsigned_v<T>)
            if (i < 0) fail(error_kind::invalid_argument, "expected a non-negative integer, got " + std::to_string(i));
        x = static_cast<T>(i);
    } else if constexpr (std::is_floating_point_v<T>) {
        x = static_cast<T>(v.as_float());
    } else if constexpr (std::is_same_v<T, std::string>) {
        x = v.as_string();
    } else if constexpr (is_std_vector<T>::value) {
        T out;
        if (v.is_list()) {
            for (const auto& e : v.as_list()) {
                typename T::value_type item{};
                attribute_from_value(e, item);
                out.push_back(std::move(item));
            }
        } else {  // a single value where a list is expected: a list of one
            typename T::value_type item{};
            attribute_from_value(v, item);
            out.push_back(std::move(item));
        }
        x = std::move(out);
    } else {
        static_assert(sizeof(T) == 0, "unsupported attribute type");
    }
}

// All attributes of `op` as an ordered map.
template <class Op>
value reflect_to_value(const Op& op) {
    value_map m;
    Op::reflect(op, [&](const auto& field, const char* name) { m.emplace_back(name, attribute_to_value(field)); });
    return value(std::move(m));
}

// Sets the attributes named in `attrs` (a map); others keep their current
// value. Unknown names and ill-typed values raise errors naming the attribute.
template <class Op>
void reflect_from_value(Op& op, const value& attrs, const std::string& op_name) {
    if (attrs.is_null()) return;
    if (!attrs.is_map())
        fail(error_kind::type_error, "attributes of op '" + op_name + "' must be a map, got " + attrs.type_name());
    for (const auto& entry : attrs.as_map()) {
        // Plain references, not structured bindings: older clang cannot capture those in lambdas.
        const std::string& key = entry.first;
        const value& v = entry.second;
        bool found = false;
        Op::reflect(op, [&](auto& field, const char* name) {
            if (key != name) return;
            found = true;
            try {
                attribute_from_value(v, field);
            } catch (const error& e) {
                throw error(e.kind(), "bad attribute '" + key + "' of op '" + op_name + "': " + e.what());
            }
        });
        if (!found) {
            std::string known;
            Op::reflect(op, [&](const auto&, const char* name) { known += (known.empty() ? "" : ", ") + std::string(name); });
            fail(error_kind::invalid_argument, "op '" + op_name + "' has no attribute '" + key + "'" +
                                                   (known.empty() ? " (it takes none)" : "; its attributes are: " + known));
        }
    }
}

}  // namespace kiln
