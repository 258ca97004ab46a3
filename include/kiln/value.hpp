#pragma once
// value: the dynamic form of an operator's attributes. Each op declares its
// attributes once (see reflect.hpp); that list converts the op to and from a
// value, and printing, equality, hashing, serialization and Python keyword
// arguments all work on the value.
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln {

class value;
using value_list = std::vector<value>;
using value_map = std::vector<std::pair<std::string, value>>;  // ordered: declaration order

class value {
public:
    using storage = std::variant<std::monostate, bool, std::int64_t, double, std::string, value_list, value_map>;

    value() = default;
    value(bool b) : data_(b) {}
    value(int i) : data_(static_cast<std::int64_t>(i)) {}
    value(std::int64_t i) : data_(i) {}
    value(double d) : data_(d) {}
    value(const char* s) : data_(std::string(s)) {}
    value(std::string s) : data_(std::move(s)) {}
    value(value_list l) : data_(std::move(l)) {}
    value(value_map m) : data_(std::move(m)) {}

    bool is_null() const { return std::holds_alternative<std::monostate>(data_); }
    bool is_bool() const { return std::holds_alternative<bool>(data_); }
    bool is_int() const { return std::holds_alternative<std::int64_t>(data_); }
    bool is_float() const { return std::holds_alternative<double>(data_); }
    bool is_number() const { return is_int() || is_float() || is_bool(); }
    bool is_string() const { return std::holds_alternative<std::string>(data_); }
    bool is_list() const { return std::holds_alternative<value_list>(data_); }
    bool is_map() const { return std::holds_alternative<value_map>(data_); }

    bool as_bool() const;
    std::int64_t as_int() const;
    double as_float() const;
    const std::string& as_string() const;
    const value_list& as_list() const;
    const value_map& as_map() const;
    // Member of a map, or nullptr.
    const value* find(const std::string& key) const;

    const storage& data() const { return data_; }
    std::string type_name() const;  // "integer", "list", ... for error messages

    friend bool operator==(const value& a, const value& b) { return a.data_ == b.data_; }
    friend bool operator!=(const value& a, const value& b) { return !(a == b); }

private:
    storage data_;
};

// "{1, 2}", "3", "true", "\"text\"", "{axis=1, keepdims=true}"
std::string to_string(const value& v);
std::size_t hash_value(const value& v);

}  // namespace kiln
