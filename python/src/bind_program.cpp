// kiln.program, kiln.target and kiln.get_target.
#include <cstdint>

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "kiln/perf.hpp"

namespace kiln::python {

namespace {

bool bool_option(const std::string& name, nb::handle v) {
    if (!PyBool_Check(v.ptr()))
        fail(error_kind::type_error, "compile option '" + name + "' must be a bool, got " + python_type_name(v));
    return v.ptr() == Py_True;
}

}  // namespace

compile_options to_compile_options(const nb::kwargs& kwargs) {
    compile_options options;
    for (auto [key, v] : kwargs) {
        std::string name = nb::cast<std::string>(key);
        if (name == "offload_copy") {
            options.offload_copy = bool_option(name, v);
        } else if (name == "trace_passes") {
            options.trace_passes = bool_option(name, v);
        } else if (name == "verify_passes") {
            options.verify_passes = bool_option(name, v);
        } else if (name == "exhaustive_tune") {
            options.exhaustive_tune = bool_option(name, v);
        } else if (name == "tuning_cache" || name == "cache_dir") {
            // A str or a pathlib.Path (anything os.fspath takes); None: no cache.
            if (v.is_none()) continue;
            nb::object path = nb::steal(PyOS_FSPath(v.ptr()));
            if (!path.is_valid() || !PyUnicode_Check(path.ptr())) {
                PyErr_Clear();
                fail(error_kind::type_error,
                     "compile option '" + name + "' must be a path (str or os.PathLike), got " + python_type_name(v));
            }
            (name == "cache_dir" ? options.cache_dir : options.tuning_cache) = nb::cast<std::string>(path);
        } else if (name == "threads") {
            if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()))
                fail(error_kind::type_error, "compile option 'threads' must be an int, got " + python_type_name(v));
            long long n = PyLong_AsLongLong(v.ptr());
            if (n < 0 || n > 1 << 16)
                fail("compile option 'threads' must be between 0 (all cores) and 65536, got " + std::to_string(n));
            options.threads = static_cast<int>(n);
        } else if (name == "max_memory_bytes") {
            if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()))
                fail(error_kind::type_error,
                     "compile option 'max_memory_bytes' must be an int, got " + python_type_name(v));
            const long long n = PyLong_AsLongLong(v.ptr());
            if (n < 0 || PyErr_Occurred()) {
                PyErr_Clear();
                fail("compile option 'max_memory_bytes' must be a non-negative byte count (0: half of this machine's "
                     "memory)");
            }
            options.max_memory_bytes = static_cast<std::size_t>(n);
        } else if (name == "disabled_passes") {
            // One name or a list of names.
            value names = to_value(v, "compile option 'disabled_passes'");
            for (const auto& item : names.is_list() ? names.as_list() : value_list{names}) {
                if (!item.is_string())
                    fail(error_kind::type_error, "compile option 'disabled_passes' must be pass names (strings)");
                options.disabled_passes.push_back(item.as_string());
            }
        } else {
            fail("unknown compile option '" + name +
                 "'; the options are: offload_copy, threads, trace_passes, disabled_passes, verify_passes, "
                 "max_memory_bytes, exhaustive_tune, tuning_cache, cache_dir");
        }
    }
    return options;
}

const target& to_target(nb::handle t) {
    if (nb::isinstance<nb::str>(t)) return get_target(nb::cast<std::string>(t));
    if (nb::isinstance<target>(t)) return nb::cast<const target&>(t);
    fail(error_kind::type_error, "compile: expected a kiln.target or a target name, got " + python_type_name(t));
}

parameter_map to_parameter_map(nb::handle inputs, const std::string& where) {
    if (!nb::isinstance<nb::dict>(inputs))
        fail(error_kind::type_error,
             where + ": expected a dict mapping parameter names to arrays, got " + python_type_name(inputs));
    parameter_map out;
    for (auto [key, v] : nb::borrow<nb::dict>(inputs)) {
        if (!nb::isinstance<nb::str>(key))
            fail(error_kind::type_error, where + ": parameter names must be strings, got " + python_type_name(key));
        std::string name = nb::cast<std::string>(key);
        out.emplace(name, to_argument(v, where + ": parameter '" + name + "'"));
    }
    return out;
}

parameter_map inputs_or_generated(const program& p, nb::handle inputs) {
    parameter_map params = inputs.is_none() ? parameter_map{} : to_parameter_map(inputs);
    unsigned long seed = 0;
    for (const auto& [name, s] : p.get_parameter_shapes())
        if (!params.count(name)) params.emplace(name, generate_argument(s, seed++));
    return params;
}

namespace {

// `stream`: None, or the caller's device stream as an int handle (from
// PyTorch, torch.cuda.current_stream().cuda_stream; 0 is CUDA's default stream).
std::vector<argument> run_program(const program& p, nb::handle inputs, nb::handle stream) {
    parameter_map params = to_parameter_map(inputs);
    if (!stream.is_none() && (!nb::isinstance<nb::int_>(stream) || nb::isinstance<nb::bool_>(stream)))
        fail(error_kind::type_error, "program.run: stream must be None or an int stream handle (such as "
                                     "torch.cuda.current_stream().cuda_stream), got " + python_type_name(stream));
    const bool on_callers_stream = !stream.is_none();
    const device_stream callers{on_callers_stream ? reinterpret_cast<void*>(nb::cast<std::uintptr_t>(stream)) : nullptr};
    // Kernels do not touch Python objects; let other Python threads run meanwhile.
    nb::gil_scoped_release release;
    return on_callers_stream ? p.eval(params, callers) : p.eval(params);
}

// Inputs not given get generate_argument data, as `kiln perf` does.
nb::dict perf_program(const program& p, nb::handle inputs, std::size_t runs, std::size_t warmup, std::size_t batch) {
    parameter_map params = inputs_or_generated(p, inputs);
    perf_report r;
    {
        nb::gil_scoped_release release;
        r = measure_performance(p, params, runs, warmup, batch);
    }
    nb::list instructions, ops;
    for (const auto& i : r.instructions) {
        nb::dict d;
        d["instruction"] = i.instruction;
        d["op"] = i.op;
        d["algorithm"] = i.algorithm;
        d["precision"] = i.precision;
        d["mean_ms"] = i.mean_ms;
        d["share"] = i.share;
        instructions.append(d);
    }
    for (const auto& o : r.ops) {
        nb::dict d;
        d["op"] = o.op;
        d["count"] = o.count;
        d["mean_ms"] = o.mean_ms;
        d["share"] = o.share;
        ops.append(d);
    }
    nb::dict out;
    out["instructions"] = instructions;
    out["ops"] = ops;
    out["runs"] = r.runs;
    out["batch"] = r.batch;
    out["rate"] = r.rate;
    out["min_ms"] = r.min_ms;
    out["median_ms"] = r.median_ms;
    out["mean_ms"] = r.mean_ms;
    out["p90_ms"] = r.p90_ms;
    out["p99_ms"] = r.p99_ms;
    out["max_ms"] = r.max_ms;
    out["kernel_ms"] = r.kernel_ms;
    out["overhead_ms"] = r.overhead_ms;
    out["text"] = format_perf_report(r);
    return out;
}

void compile_program(program& p, nb::handle t, const nb::kwargs& kwargs) {
    const target& tgt = to_target(t);
    compile_options options = to_compile_options(kwargs);
    nb::gil_scoped_release release;
    p.compile(tgt, options);
}

}  // namespace

void bind_program(nb::module_& m) {
    nb::class_<target>(m, "target", "A compilation target; get one with kiln.get_target(name).")
        .def("name", &target::name)
        .def("allocate", &target::allocate, nb::arg("shape"),
             "Zeroed memory of `shape` where the target reads it (device memory on gpu, host on cpu / ref)")
        .def(
            "copy_to",
            [](const target& t, nb::handle value) {
                argument host = to_argument(value, t.name() + " target copy_to");
                host.require_host("copy_to (it copies host memory to the target)");
                return t.copy_to(host);
            },
            nb::arg("value"), "A copy of host `value` in the target's memory (device memory on gpu)")
        .def(
            "copy_from",
            [](const target& t, const argument& value) {
                if (value.location() == memory_location::device && t.memory() == memory_location::host)
                    fail("copy_from: the argument is device memory and the '" + t.name() +
                         "' target reads host memory; use the gpu target's copy_from");
                return t.copy_from(value);
            },
            nb::arg("value"), "A host copy of `value`, which is in the target's memory")
        .def(
            "synchronize",
            [](const target& t) {
                nb::gil_scoped_release release;
                t.synchronize();
            },
            "Waits until all work queued on the target's device has finished (runs given a stream included); "
            "nothing to wait for on a host target")
        .def("__repr__", [](const target& t) { return "kiln.get_target(\"" + t.name() + "\")"; });

    m.def("get_target", &get_target, nb::arg("name"), nb::rv_policy::reference,
          "The target called `name` (\"ref\" or \"cpu\").");
    m.def("get_target_names", &get_target_names);

    nb::class_<program>(m, "program", "A model: a main module and, after compile(), its executable.")
        .def(nb::init<>())
        .def("get_main_module", nb::overload_cast<>(&program::get_main_module), nb::rv_policy::reference_internal)
        .def("create_module", &program::create_module, nb::arg("name"), nb::rv_policy::reference_internal,
             "A new empty module, for the branches or body that a control-flow instruction takes.")
        .def(
            "get_module",
            [](program& p, const std::string& name) {
                module* m = p.get_module(name);
                if (m == nullptr) fail("program has no module named '" + name + "'");
                return m;
            },
            nb::arg("name"), nb::rv_policy::reference_internal)
        .def("compile", compile_program, nb::arg("target"), nb::arg("options"),
             "Optimizes the graph for `target` and builds its executable. Options: offload_copy, threads, "
             "trace_passes, disabled_passes, verify_passes.")
        .def("run", run_program, nb::arg("inputs"), nb::arg("stream") = nb::none(),
             "Runs the compiled program on {name: array}; returns the outputs as a list of kiln.argument. "
             "stream: the caller's device stream as an int handle (gpu target): the run is ordered after the "
             "work queued there and later work there waits for it; without offload_copy it returns without "
             "waiting. Host targets refuse a stream other than 0.")
        .def("perf_report", perf_program, nb::arg("inputs") = nb::none(), nb::arg("runs") = 20, nb::arg("warmup") = 3,
             nb::arg("batch") = 1,
             "Profiles the compiled program: per-instruction and per-op times, rate, latency percentiles, "
             "overhead outside kernels; 'text' holds the report as `kiln perf` prints it.")
        .def("set_specialiser", &set_python_specialiser, nb::arg("build"), nb::arg("ranges"),
             "Gives parameters ranges ({name: kiln.shape with dyn_dims}) and the callable that builds this "
             "program, uncompiled and static, at any extents in them (build({name: lens}) -> kiln.program), so "
             "that compile() compiles one program for the ranges where it can (per_shape_compilation_reason "
             "says why not). The program itself must be the build at the ranges' first optimals.")
        .def("is_compiled", &program::is_compiled)
        .def("is_dynamic", &program::is_dynamic, "Some parameter has a dimension that is a range.")
        .def("compiled_from_cache", &program::compiled_from_cache,
             "True when compile(cache_dir=...) loaded the program from the cache and compiled nothing.")
        .def("specialisation_count", &program::specialisation_count,
             "Static programs a compiled dynamic program holds now (0 for a static program).")
        .def("per_shape_compilation_reason", &program::per_shape_compilation_reason,
             "Why a compiled dynamic program compiles each set of extents on its own instead of once for its "
             "ranges, naming the instruction that forced it ('' when compiled once, or static).")
        .def("target_name", &program::target_name)
        .def(
            "get_compile_options",
            [](const program& p) {
                const compile_options& o = p.get_compile_options();
                nb::dict d;
                d["offload_copy"] = o.offload_copy;
                d["threads"] = o.threads;
                d["trace_passes"] = o.trace_passes;
                d["disabled_passes"] = o.disabled_passes;
                d["verify_passes"] = o.verify_passes;
                // Only compile reads these (a loaded program keeps the choices, not the option).
                if (o.exhaustive_tune) d["exhaustive_tune"] = true;
                if (!o.tuning_cache.empty()) d["tuning_cache"] = o.tuning_cache;
                return d;
            },
            "The options of the last compile() (also restored by load()), as keyword arguments of compile().")
        .def("get_parameter_names", &program::get_parameter_names)
        .def("get_parameter_shapes", &program::get_parameter_shapes)
        .def("get_output_shapes", &program::get_output_shapes)
        .def("planned_memory_bytes", &program::planned_memory_bytes)
        .def("held_literal_bytes", &program::held_literal_bytes,
             "Bytes the program's literals hold themselves (each buffer once); after compile, weights handed over to "
             "kernels that keep their own packed copy hold none.")
        .def("kernel_constant_bytes", &program::kernel_constant_bytes,
             "Bytes of constants (packed weights) the compiled program's kernels keep in their own layouts.")
        .def("adopted_constant_bytes", &program::adopted_constant_bytes,
             "Bytes of constants the kernels read in place from the pre-packed weights of the .kiln file the program "
             "was loaded from: nothing was packed for them on load, and processes running the file share them.")
        .def(
            "get_kernel_algorithms",
            [](const program& p) {
                nb::list out;
                for (const auto& c : p.kernel_choices()) out.append(nb::make_tuple(c.instruction, c.op, c.algorithm));
                return out;
            },
            "The kernel algorithm the target chose for each instruction of the compiled main module, as "
            "(instruction, op, algorithm) tuples in program order; empty before compile or on ref.")
        .def(
            "get_instruction_precisions",
            [](const program& p) {
                nb::list out;
                for (const auto& ip : instruction_precisions(p))
                    out.append(nb::make_tuple(ip.instruction, ip.op, ip.arithmetic, ip.result_type));
                return out;
            },
            "What each computing instruction of the compiled main module computes in, as (instruction, op, "
            "arithmetic, result type) tuples in program order, e.g. ('@12', 'convolution', 'int8', 'float32'): "
            "the type its kernel computes in (as the kernel states it, else read from the instruction's types) "
            "and its result's dtype, as `kiln perf` and `kiln read` show them.")
        .def("print", [](const program& p) { nb::print(to_string(p).c_str(), nb::str("")); })
        .def("__str__", [](const program& p) { return to_string(p); })
        .def("__copy__", [](const program& p) { return program(p); })
        .def(
            "__deepcopy__", [](const program& p, nb::handle) { return program(p); }, nb::arg("memo"));
}

}  // namespace kiln::python
