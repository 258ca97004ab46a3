#include "kiln/value.hpp"

#include <functional>
#include <sstream>

#include "kiln/errors.hpp"

namespace kiln {

namespace {
[[noreturn]] void wrong_type(const value& v, const char* wanted) {
    fail(error_kind::type_error, std::string("expected ") + wanted + ", got " + v.type_name() + " " + to_string(v));
}
}  // namespace

bool value::as_bool() const {
    if (is_bool()) return std::get<bool>(data_);
    if (is_int()) return std::get<std::int64_t>(data_) != 0;
    wrong_type(*this, "a boolean");
}

std::int64_t value::as_int() const {
    if (is_int()) return std::get<std::int64_t>(data_);
    if (is_bool()) return std::get<bool>(data_) ? 1 : 0;
    if (is_float()) {
        double d = std::get<double>(data_);
        if (d == static_cast<double>(static_cast<std::int64_t>(d))) return static_cast<std::int64_t>(d);
    }
    wrong_type(*this, "an integer");
}

double value::as_float() const {
    if (is_float()) return std::get<double>(data_);
    if (is_int()) return static_cast<double>(std::get<std::int64_t>(data_));
    wrong_type(*this, "a number");
}

const std::string& value::as_string() const {
    if (!is_string()) wrong_type(*this, "a string");
    return std::get<std::string>(data_);
}

const value_list& value::as_list() const {
    if (!is_list()) wrong_type(*this, "a list");
    return std::get<value_list>(data_);
}

const value_map& value::as_map() const {
    if (!is_map()) wrong_type(*this, "a map");
    return std::get<value_map>(data_);
}

const value* value::find(const std::string& key) const {
    if (!is_map()) return nullptr;
    for (const auto& [k, v] : std::get<value_map>(data_))
        if (k == key) return &v;
    return nullptr;
}

std::string value::type_name() const {
    switch (data_.index()) {
    case 0: return "null";
    case 1: return "boolean";
    case 2: return "integer";
    case 3: return "float";
    case 4: return "string";
    case 5: return "list";
    default: return "map";
    }
}

std::string to_string(const value& v) {
    std::ostringstream os;
    if (v.is_null()) {
        os << "null";
    } else if (v.is_bool()) {
        os << (v.as_bool() ? "true" : "false");
    } else if (v.is_int()) {
        os << v.as_int();
    } else if (v.is_float()) {
        os.precision(9);
        os << v.as_float();
    } else if (v.is_string()) {
        os << '"' << v.as_string() << '"';
    } else if (v.is_list()) {
        os << "{";
        const auto& l = v.as_list();
        for (std::size_t i = 0; i < l.size(); ++i) os << (i ? ", " : "") << to_string(l[i]);
        os << "}";
    } else if (v.is_map()) {
        os << "{";
        const auto& m = v.as_map();
        for (std::size_t i = 0; i < m.size(); ++i) os << (i ? ", " : "") << m[i].first << "=" << to_string(m[i].second);
        os << "}";
    } else {
        // A value left empty by an exception while it was assigned: as_map's error would print it again.
        os << "<no value>";
    }
    return os.str();
}

std::size_t hash_value(const value& v) {
    std::size_t h = std::hash<std::size_t>{}(v.data().index());
    auto mix = [&](std::size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    if (v.is_bool()) mix(std::hash<bool>{}(v.as_bool()));
    else if (v.is_int()) mix(std::hash<std::int64_t>{}(v.as_int()));
    else if (v.is_float()) mix(std::hash<double>{}(v.as_float()));
    else if (v.is_string()) mix(std::hash<std::string>{}(v.as_string()));
    else if (v.is_list())
        for (const auto& e : v.as_list()) mix(hash_value(e));
    else if (v.is_map())
        for (const auto& [k, e] : v.as_map()) {
            mix(std::hash<std::string>{}(k));
            mix(hash_value(e));
        }
    return h;
}

}  // namespace kiln
