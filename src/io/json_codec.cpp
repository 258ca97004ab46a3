#include "io/json_codec.hpp"

#include <cmath>
#include <limits>

#include "kiln/errors.hpp"

namespace kiln::io {

namespace {

[[noreturn]] void bad(const std::string& what) {
    fail(error_kind::parse_error, what);
}

// Deeper nesting than any op attribute needs is treated as malformed input,
// which also bounds the recursion below.
constexpr int max_value_depth = 32;

struct too_deep {};

value to_value(const json& j, int depth) {
    if (depth > max_value_depth)
        bad("attribute value nested deeper than " + std::to_string(max_value_depth) + " levels");
    switch (j.type()) {
        case json::value_t::null:
            return value();
        case json::value_t::boolean:
            return value(j.get<bool>());
        case json::value_t::number_integer:
            return value(j.get<std::int64_t>());
        case json::value_t::number_unsigned: {
            auto u = j.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                bad("integer attribute " + std::to_string(u) + " is out of range");
            return value(static_cast<std::int64_t>(u));
        }
        case json::value_t::number_float:
            return value(j.get<double>());
        case json::value_t::string:
            return value(j.get<std::string>());
        case json::value_t::array: {
            value_list l;
            l.reserve(j.size());
            for (const auto& e : j) l.push_back(to_value(e, depth + 1));
            return value(std::move(l));
        }
        case json::value_t::object: {
            if (j.size() == 1 && j.contains("$float")) {
                const json& s = j["$float"];
                if (s == "nan") return value(std::numeric_limits<double>::quiet_NaN());
                if (s == "inf") return value(std::numeric_limits<double>::infinity());
                if (s == "-inf") return value(-std::numeric_limits<double>::infinity());
                bad("invalid special float " + s.dump());
            }
            value_map m;
            m.reserve(j.size());
            for (const auto& [k, v] : j.items()) m.emplace_back(k, to_value(v, depth + 1));
            return value(std::move(m));
        }
        default:
            bad(std::string("unsupported JSON value of type ") + j.type_name());
    }
}

std::vector<std::size_t> to_sizes(const json& j, const char* what) {
    if (!j.is_array()) bad(std::string("'") + what + "' must be an array, got " + j.type_name());
    std::vector<std::size_t> out;
    out.reserve(j.size());
    for (const auto& e : j) out.push_back(static_cast<std::size_t>(as_uint(e, what)));
    return out;
}

json dyn_dim_to_json(const dynamic_dimension& d) {
    return json{{"min", d.min}, {"max", d.max}, {"optimals", d.optimals}};
}

dynamic_dimension json_to_dyn_dim(const json& j, std::size_t axis) {
    const std::string where = "dyn_dims[" + std::to_string(axis) + "]";
    if (!j.is_object()) bad("'" + where + "' must be an object {min, max, optimals}, got " + j.type_name());
    auto lo = static_cast<std::size_t>(as_uint(member(j, "min"), where + ".min"));
    auto hi = static_cast<std::size_t>(as_uint(member(j, "max"), where + ".max"));
    std::vector<std::size_t> optimals;
    if (const json* o = optional_member(j, "optimals")) optimals = to_sizes(*o, "optimals");
    try {
        return dynamic_dimension(lo, hi, std::move(optimals));
    } catch (const error& e) {
        bad("'" + where + "': " + e.what());
    }
}

// A shape whose element count or memory span overflows would make later size
// computations (and allocations) meaningless.
void check_not_too_large(dtype type, const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides) {
    constexpr std::size_t limit = std::size_t{1} << 62;
    std::size_t elements = 1;
    std::size_t last = 0;
    for (std::size_t i = 0; i < lens.size(); ++i) {
        std::size_t step = 0;
        if (__builtin_mul_overflow(elements, lens[i], &elements) || elements > limit ||
            (lens[i] > 0 && (__builtin_mul_overflow(lens[i] - 1, strides[i], &step) ||
                             __builtin_add_overflow(last, step, &last) || last > limit)))
            bad("shape " + to_string(lens) + " with strides " + to_string(strides) + " is too large");
    }
    std::size_t bytes = 0;
    if (__builtin_mul_overflow(last + 1, dtype_size(type), &bytes) || bytes > limit)
        bad("shape " + to_string(lens) + " is too large");
}

}  // namespace

json parse_document(const char* begin, const char* end) {
    // The callback sees each array and object as it opens, before the parser
    // goes into it; an exception is the only way to stop the parse there.
    auto bounded = [](int depth, json::parse_event_t event, json&) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
            depth >= max_document_depth)
            throw too_deep{};
        return true;
    };
    try {
        return json::parse(begin, end, bounded);
    } catch (const too_deep&) {
        bad("the metadata nests arrays and objects more than " + std::to_string(max_document_depth) + " levels deep");
    }
}

json value_to_json(const value& v) {
    return std::visit(
        [](const auto& x) -> json {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::monostate>) {
                return json(nullptr);
            } else if constexpr (std::is_same_v<T, double>) {
                if (std::isfinite(x)) return json(x);
                return json::object({{"$float", std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf")}});
            } else if constexpr (std::is_same_v<T, value_list>) {
                json a = json::array();
                for (const auto& e : x) a.push_back(value_to_json(e));
                return a;
            } else if constexpr (std::is_same_v<T, value_map>) {
                json o = json::object();
                for (const auto& [k, e] : x) o[k] = value_to_json(e);
                return o;
            } else {
                return json(x);
            }
        },
        v.data());
}

value json_to_value(const json& j) {
    return to_value(j, 0);
}

json shape_to_json(const shape& s) {
    if (s.is_tuple()) {
        json elements = json::array();
        for (const auto& e : s.sub_shapes()) elements.push_back(shape_to_json(e));
        return json{{"tuple", std::move(elements)}};
    }
    if (s.dynamic()) {
        // No lens or strides: a reader that predates ranges fails on the
        // missing 'lens' instead of loading the maximum extents as static.
        json dims = json::array();
        for (const auto& d : s.dyn_dims()) dims.push_back(dyn_dim_to_json(d));
        return json{{"type", to_string(s.type())}, {"dyn_dims", std::move(dims)}};
    }
    return json{{"type", to_string(s.type())}, {"lens", s.lens()}, {"strides", s.strides()}};
}

shape json_to_shape(const json& j) {
    if (!j.is_object()) bad(std::string("a shape must be an object, got ") + j.type_name());
    if (const json* elements = optional_member(j, "tuple")) {
        if (!elements->is_array() || elements->empty()) bad("'tuple' must be a non-empty array of shapes");
        std::vector<shape> subs;
        std::size_t total = 0;
        for (const auto& e : *elements) {
            if (e.is_object() && e.contains("tuple")) bad("a tuple element cannot be a tuple");
            subs.push_back(json_to_shape(e));
            // Each element is bounded below; their sum (with alignment) must be too.
            total += subs.back().bytes() + 64;
            if (total > (std::size_t{1} << 62)) bad("tuple shape is too large");
        }
        return shape::tuple(subs);
    }
    std::string type_name = get_string(j, "type");
    dtype type{};
    try {
        type = parse_dtype(type_name);
    } catch (const error&) {
        bad("unknown dtype '" + type_name + "'");
    }
    if (const json* dims_json = optional_member(j, "dyn_dims")) {
        if (optional_member(j, "lens") != nullptr || optional_member(j, "strides") != nullptr)
            bad("a shape has either 'dyn_dims' or 'lens' and 'strides', not both");
        if (!dims_json->is_array()) bad(std::string("'dyn_dims' must be an array, got ") + dims_json->type_name());
        std::vector<dynamic_dimension> dims;
        for (std::size_t i = 0; i < dims_json->size(); ++i) dims.push_back(json_to_dyn_dim((*dims_json)[i], i));
        shape s = shape::from_dyn_dims(type, std::move(dims));
        check_not_too_large(type, s.lens(), s.strides());
        return s;
    }
    auto lens = to_sizes(member(j, "lens"), "lens");
    auto strides = to_sizes(member(j, "strides"), "strides");
    if (lens.size() != strides.size())
        bad("shape has " + std::to_string(lens.size()) + " lens but " + std::to_string(strides.size()) + " strides");
    check_not_too_large(type, lens, strides);
    return {type, std::move(lens), std::move(strides)};
}

json options_to_json(const compile_options& o) {
    return json{{"offload_copy", o.offload_copy},
                {"threads", o.threads},
                {"trace_passes", o.trace_passes},
                {"disabled_passes", o.disabled_passes},
                {"verify_passes", o.verify_passes}};
}

compile_options json_to_options(const json& j) {
    if (!j.is_object()) bad(std::string("compile options must be an object, got ") + j.type_name());
    compile_options o;
    // Members missing from the file keep their defaults; options added by later versions are ignored.
    auto flag = [&](const char* key, bool& out) {
        if (const json* v = optional_member(j, key)) {
            if (!v->is_boolean()) bad(std::string("compile option '") + key + "' must be a boolean");
            out = v->get<bool>();
        }
    };
    flag("offload_copy", o.offload_copy);
    flag("trace_passes", o.trace_passes);
    flag("verify_passes", o.verify_passes);
    if (const json* v = optional_member(j, "threads")) {
        std::uint64_t t = as_uint(*v, "threads");
        if (t > 1u << 16) bad("compile option 'threads' is implausibly large: " + std::to_string(t));
        o.threads = static_cast<int>(t);
    }
    if (const json* v = optional_member(j, "disabled_passes")) {
        if (!v->is_array()) bad("compile option 'disabled_passes' must be an array");
        for (const auto& e : *v) {
            if (!e.is_string()) bad("compile option 'disabled_passes' must hold strings");
            o.disabled_passes.push_back(e.get<std::string>());
        }
    }
    return o;
}

const json* optional_member(const json& object, const char* key) {
    if (!object.is_object()) bad(std::string("expected an object holding '") + key + "', got " + object.type_name());
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

const json& member(const json& object, const char* key) {
    const json* v = optional_member(object, key);
    if (v == nullptr) bad(std::string("missing '") + key + "'");
    return *v;
}

std::string get_string(const json& object, const char* key) {
    const json& v = member(object, key);
    if (!v.is_string()) bad(std::string("'") + key + "' must be a string, got " + v.type_name());
    return v.get<std::string>();
}

std::uint64_t as_uint(const json& j, const std::string& what) {
    if (j.is_number_unsigned()) return j.get<std::uint64_t>();
    if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(j.get<std::int64_t>());
    bad("'" + what + "' must be a non-negative integer, got " + j.dump());
}

std::uint64_t get_uint(const json& object, const char* key) {
    return as_uint(member(object, key), key);
}

const json& get_array(const json& object, const char* key) {
    const json& v = member(object, key);
    if (!v.is_array()) bad(std::string("'") + key + "' must be an array, got " + v.type_name());
    return v;
}

}  // namespace kiln::io
