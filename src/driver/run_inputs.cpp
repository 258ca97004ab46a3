// Preparing a model and its inputs for the commands that run it.
#include "driver/run_inputs.hpp"

#include "driver/npy.hpp"

namespace kiln::driver {

namespace {

std::string known_parameters(const program& p) {
    std::string out;
    for (const auto& n : p.get_parameter_names()) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "(none)" : out;
}

}  // namespace

parameter_map make_inputs(const program& p, const run_settings& s) {
    parameter_map inputs;
    auto shapes = p.get_parameter_shapes();
    for (const auto& spec : s.inputs) {
        auto eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
            fail("--input expects name=path.npy, got '" + spec + "'");
        std::string name = spec.substr(0, eq);
        if (!shapes.count(name))
            fail("--input names '" + name + "', which is not a parameter; the parameters are: " + known_parameters(p));
        if (inputs.count(name)) fail("--input gives '" + name + "' twice");
        inputs.emplace(name, read_npy(spec.substr(eq + 1)));
    }
    // A dynamic program gets random inputs at its first optimal profile.
    const parameter_lens profile = optimal_profiles(shapes).front();
    unsigned long index = 0;
    for (const auto& [name, sh] : shapes) {
        auto lens = profile.find(name);
        if (!inputs.count(name))
            inputs.emplace(name, generate_argument(lens == profile.end() ? sh : sh.specialised(lens->second),
                                                   s.seed + index));
        ++index;
    }
    if (!s.offload_copy) {
        const target& t = get_target(p.target_name());
        for (auto& [name, arg] : inputs) arg = t.copy_to(arg);
    }
    return inputs;
}

std::vector<argument> on_host(const program& p, std::vector<argument> outputs) {
    for (auto& out : outputs)
        if (out.location() == memory_location::device) out = get_target(p.target_name()).copy_from(out);
    return outputs;
}

namespace {

// --disable-offload-copy hands the program device memory: a host target has none.
void check_offload_target(const target& t) {
    if (t.memory() == memory_location::host)
        fail("--disable-offload-copy keeps inputs and outputs in device memory, and target '" + t.name() +
             "' runs on the host; use it with a device target (--target gpu)");
}

}  // namespace

program prepare(program p, const run_settings& s) {
    if (p.is_compiled()) {
        if (!s.target.empty() && s.target != p.target_name())
            fail(s.model + " is compiled for target '" + p.target_name() + "', not '" + s.target +
                 "'; drop --target or use the uncompiled model");
        if (p.get_compile_options().offload_copy != s.offload_copy) {
            if (p.is_dynamic())
                fail(s.model + " is a dynamic program compiled with offload_copy=" +
                     (s.offload_copy ? "false" : "true") + "; compile it again with the setting wanted");
            const target& t = get_target(p.target_name());
            if (!s.offload_copy) check_offload_target(t);
            compile_options options = p.get_compile_options();
            options.offload_copy = s.offload_copy;
            p.lower_compiled(t.name(), options);
        }
        return p;
    }
    const target& t = get_target(s.target.empty() ? "cpu" : s.target);
    if (!s.offload_copy) check_offload_target(t);
    compile_options options;
    options.offload_copy = s.offload_copy;
    p.compile(t, options);
    return p;
}

}  // namespace kiln::driver
