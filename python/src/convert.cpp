// Conversions between Python objects and Kiln's dynamic values and dtypes.
#include <climits>
#include <optional>

#include "bindings.hpp"

namespace kiln::python {

std::string python_type_name(nb::handle obj) {
    return nb::type_name(obj.type()).c_str();
}

namespace {

// numpy, if the user's program already imported it: attribute conversion
// must not import numpy on its own.
nb::object loaded_numpy() {
    nb::dict modules = nb::borrow<nb::dict>(nb::module_::import_("sys").attr("modules"));
    if (modules.contains("numpy")) return modules["numpy"];
    return nb::none();
}

bool is_numpy_dtype_like(const nb::object& np, nb::handle obj) {
    if (np.is_none()) return false;
    if (nb::isinstance(obj, np.attr("dtype"))) return true;
    // Scalar types such as numpy.float32 passed as a class.
    return PyType_Check(obj.ptr()) && PyObject_IsSubclass(obj.ptr(), np.attr("generic").ptr()) == 1;
}

}  // namespace

dtype to_dtype(nb::handle obj) {
    if (nb::isinstance<nb::str>(obj)) return parse_dtype(nb::cast<std::string>(obj));
    nb::object np = loaded_numpy();
    if (np.is_none()) np = nb::module_::import_("numpy");
    nb::object name;
    try {
        name = np.attr("dtype")(obj).attr("name");
    } catch (const nb::python_error&) {
        fail(error_kind::type_error,
             "expected a dtype name such as \"float32\" or a numpy dtype, got " + python_type_name(obj));
    }
    return parse_dtype(nb::cast<std::string>(name));
}

value to_value(nb::handle obj, const std::string& what) {
    // bool before int: Python's bool is a subclass of int.
    if (PyBool_Check(obj.ptr())) return value(obj.ptr() == Py_True);
    if (PyLong_Check(obj.ptr())) {
        int overflow = 0;
        long long i = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
        if (overflow != 0) fail(error_kind::invalid_argument, what + ": integer does not fit in 64 bits");
        return value(static_cast<std::int64_t>(i));
    }
    if (PyFloat_Check(obj.ptr())) return value(PyFloat_AsDouble(obj.ptr()));
    if (nb::isinstance<nb::str>(obj)) return value(nb::cast<std::string>(obj));
    if (nb::isinstance<shape>(obj)) return attribute_to_value(nb::cast<const shape&>(obj));
    if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj)) {
        value_list items;
        for (nb::handle item : obj) items.push_back(to_value(item, what));
        return value(std::move(items));
    }
    if (nb::isinstance<nb::dict>(obj)) {
        value_map items;
        for (auto [key, item] : nb::borrow<nb::dict>(obj)) {
            if (!nb::isinstance<nb::str>(key))
                fail(error_kind::type_error, what + ": dictionary keys must be strings, got " + python_type_name(key));
            items.emplace_back(nb::cast<std::string>(key), to_value(item, what));
        }
        return value(std::move(items));
    }
    nb::object np = loaded_numpy();
    if (is_numpy_dtype_like(np, obj)) return value(to_string(to_dtype(obj)));
    if (!np.is_none()) {
        // numpy scalars and arrays become the equivalent Python values.
        if (nb::isinstance(obj, np.attr("generic")) || nb::isinstance(obj, np.attr("ndarray")))
            return to_value(obj.attr(nb::isinstance(obj, np.attr("ndarray")) ? "tolist" : "item")(), what);
    }
    fail(error_kind::type_error,
         what + ": cannot use a " + python_type_name(obj) +
             " as an attribute value (expected bool, int, float, str, a dtype or a list of these)");
}

nb::object from_value(const value& v) {
    if (v.is_null()) return nb::none();
    if (v.is_bool()) return nb::bool_(v.as_bool());
    if (v.is_int()) return nb::int_(v.as_int());
    if (v.is_float()) return nb::float_(v.as_float());
    if (v.is_string()) return nb::str(v.as_string().c_str(), v.as_string().size());
    if (v.is_list()) {
        nb::list out;
        for (const auto& item : v.as_list()) out.append(from_value(item));
        return out;
    }
    nb::dict out;
    for (const auto& [key, item] : v.as_map()) out[nb::str(key.c_str(), key.size())] = from_value(item);
    return out;
}

namespace {

// Python ints and integer-like objects (numpy integers), but not bools.
bool is_integer(nb::handle obj) { return PyIndex_Check(obj.ptr()) && !nb::isinstance<nb::bool_>(obj); }

// One non-negative extent of a dynamic dimension.
std::size_t to_extent(nb::handle obj, const std::string& what) {
    if (!is_integer(obj))
        fail(error_kind::type_error, what + " must be an int, got " + nb::cast<std::string>(nb::repr(obj)));
    auto v = nb::cast<std::int64_t>(nb::steal(PyNumber_Index(obj.ptr())));
    if (v < 0) fail(error_kind::invalid_argument, what + " must be non-negative, got " + std::to_string(v));
    return static_cast<std::size_t>(v);
}

// A member of a dict, or an attribute of any other object (a
// migraphx-style dynamic_dimension); nullopt when it has none.
std::optional<nb::object> field(nb::handle dim, const char* key) {
    if (nb::isinstance<nb::dict>(dim)) {
        nb::dict d = nb::borrow<nb::dict>(dim);
        if (!d.contains(key)) return std::nullopt;
        return nb::borrow(d[key]);
    }
    if (!nb::hasattr(dim, key)) return std::nullopt;
    return dim.attr(key);
}

}  // namespace

dynamic_dimension to_dynamic_dimension(nb::handle dim, const std::string& where) {
    if (is_integer(dim)) return dynamic_dimension(to_extent(dim, where));
    auto lo = field(dim, "min");
    auto hi = field(dim, "max");
    if (!lo || !hi)
        fail(error_kind::type_error, where +
                                         " must be an int, a dict {'min', 'max', 'optimals'} or an object with "
                                         ".min and .max, got " + nb::cast<std::string>(nb::repr(dim)));
    if (nb::isinstance<nb::dict>(dim))
        for (auto [key, unused] : nb::borrow<nb::dict>(dim)) {
            std::string name = nb::cast<std::string>(nb::str(key));
            if (name != "min" && name != "max" && name != "optimals")
                fail(error_kind::invalid_argument,
                     where + " has an unknown key '" + name + "' (expected min, max, optimals)");
        }
    std::size_t min = to_extent(*lo, where + ".min");
    std::size_t max = to_extent(*hi, where + ".max");
    std::vector<std::size_t> optimals;
    if (auto opts = field(dim, "optimals"); opts && !opts->is_none())
        for (nb::handle o : *opts) optimals.push_back(to_extent(o, where + ".optimals"));
    try {
        return dynamic_dimension(min, max, std::move(optimals));
    } catch (const error& e) {
        fail(e.kind(), where + ": " + e.what());
    }
}

std::vector<dynamic_dimension> to_dynamic_dimensions(nb::handle obj, const std::string& what) {
    if (!nb::isinstance<nb::list>(obj) && !nb::isinstance<nb::tuple>(obj))
        fail(error_kind::type_error, what + ": expected a list with one int or range per dimension, got " +
                                         python_type_name(obj));
    std::vector<dynamic_dimension> dims;
    for (nb::handle item : obj) dims.push_back(to_dynamic_dimension(item, what + "[" + std::to_string(dims.size()) + "]"));
    return dims;
}

}  // namespace kiln::python
