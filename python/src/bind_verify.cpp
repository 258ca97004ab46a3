// kiln.verify: a target against ref, by outputs, per instruction or pass by
// pass, as `kiln verify` does (see kiln/verify.hpp).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "bindings.hpp"

namespace kiln::python {

namespace {

nb::dict comparison_dict(const value_comparison& c) {
    nb::dict d;
    d["ok"] = c.ok();
    d["same_shape"] = c.same_shape;
    d["got_shape"] = c.got_shape;
    d["expected_shape"] = c.expected_shape;
    d["elements"] = c.elements;
    d["mismatches"] = c.mismatches;
    d["first_mismatch"] = c.first_mismatch;
    d["got_at_first"] = c.got_at_first;
    d["expected_at_first"] = c.expected_at_first;
    d["max_abs_error"] = c.max_abs_error;
    d["max_rel_error"] = c.max_rel_error;
    d["text"] = describe(c);
    return d;
}

nb::list comparison_list(const std::vector<value_comparison>& cs) {
    nb::list out;
    for (const auto& c : cs) out.append(comparison_dict(c));
    return out;
}

nb::dict divergence_dict(const instruction_divergence& d, bool with_values) {
    nb::dict out;
    out["instruction"] = d.instruction;
    out["op"] = d.op;
    out["input_names"] = d.input_names;
    out["input_shapes"] = d.input_shapes;
    out["output_shape"] = d.output_shape;
    out["changed_input"] = d.changed_input >= 0 ? nb::object(nb::int_(d.changed_input)) : nb::none();
    out["difference"] = comparison_dict(d.difference);
    if (with_values) {
        out["inputs"] = d.inputs;
        out["got"] = d.got;
        out["expected"] = d.expected;
    }
    return out;
}

nb::dict stage_dict(const bisect_stage& s) {
    nb::dict out;
    out["position"] = s.position;
    out["pass"] = s.lowering ? nb::object(nb::none()) : nb::object(nb::str(s.pass.c_str()));
    out["lowering"] = s.lowering;
    out["disabled"] = s.disabled;
    out["failure"] = s.failure.empty() ? nb::object(nb::none()) : nb::object(nb::str(s.failure.c_str()));
    out["ok"] = s.ok();
    out["outputs"] = comparison_list(s.outputs);
    return out;
}

nb::dict bisect_dict(const bisect_report& r) {
    nb::dict out;
    out["passed"] = r.passed();
    out["target"] = r.target;
    out["pipeline"] = r.pipeline;
    nb::list stages;
    nb::object first = nb::none();
    for (const auto& s : r.stages) {
        nb::dict d = stage_dict(s);
        if (first.is_none() && !s.ok()) first = d;
        stages.append(d);
    }
    out["stages"] = stages;
    out["first_failure"] = first;
    out["text"] = format_bisect_report(r);
    return out;
}

// +inf / -inf stay floats (json-like consumers read them as Infinity).
nb::dict quantization_dict(const quantization_report& r) {
    nb::dict out;
    out["evaluated_on"] = r.evaluated_on;
    out["samples"] = r.samples;
    nb::list layers;
    for (const auto& l : r.layers) {
        nb::dict d;
        d["instruction"] = l.instruction;
        d["origin"] = l.origin;
        d["op"] = l.op;
        d["output_shape"] = l.output_shape;
        d["sqnr_db"] = l.sqnr_db;
        d["own_sqnr_db"] = l.own_sqnr_db;
        layers.append(d);
    }
    out["layers"] = layers;
    nb::list worst;
    for (std::size_t i : r.worst(r.layers.size())) worst.append(layers[i]);
    out["worst"] = worst;  // every layer, lowest own SQNR first
    out["output_sqnr_db"] = r.output_sqnr_db;
    out["text"] = format_quantization_report(r);
    return out;
}

bool holds_quantization(const program& p) {
    if (p.is_compiled()) return false;
    const module& m = *p.get_main_module();
    return std::any_of(m.begin(), m.end(), [](const auto& ins) { return ins.name() == "dequantize_linear"; });
}

// One {name: array} or a list of them.
std::vector<parameter_map> input_sets(const program& p, nb::handle inputs) {
    std::vector<parameter_map> sets;
    if (nb::isinstance<nb::list>(inputs) || nb::isinstance<nb::tuple>(inputs)) {
        for (nb::handle item : inputs) sets.push_back(inputs_or_generated(p, item));
        if (sets.empty()) fail("verify_quantization: 'inputs' is an empty list; give at least one {name: array}");
    } else {
        sets.push_back(inputs_or_generated(p, inputs));
    }
    return sets;
}

nb::dict verify_quantization_program(const program& p, nb::handle inputs_arg, nb::handle target_arg) {
    if (p.is_compiled())
        fail("verify_quantization: the program is compiled, so its float32 form is gone; pass the program "
             "before compiling it");
    const std::vector<parameter_map> sets = input_sets(p, inputs_arg);
    const target* t = target_arg.is_none() ? nullptr : &to_target(target_arg);
    quantization_report r;
    {
        nb::gil_scoped_release release;
        r = verify_quantization(p, sets, t);
    }
    return quantization_dict(r);
}

nb::dict verify_program(const program& p, nb::handle target_arg, nb::handle inputs_arg, double rtol, double atol,
                        bool per_instruction, bool bisect, const nb::kwargs& kwargs) {
    if (per_instruction && bisect) fail("verify: choose per_instruction or bisect, not both");
    if (rtol < 0 || atol < 0 || rtol != rtol || atol != atol)
        fail("verify: rtol and atol must be non-negative numbers");
    const tolerance tol{rtol, atol};
    const compile_options options = to_compile_options(kwargs);
    const parameter_map inputs = inputs_or_generated(p, inputs_arg);

    if (bisect) {
        if (p.is_compiled())
            fail("verify(bisect=True): the program is compiled for target '" + p.target_name() +
                 "', so its passes have already run; bisect the program before compiling it");
        const target& t = target_arg.is_none() ? get_target("cpu") : to_target(target_arg);
        bisect_report r;
        {
            nb::gil_scoped_release release;
            r = bisect_passes(p, t, inputs, tol, options);
        }
        return bisect_dict(r);
    }

    program compiled = p;
    if (p.is_compiled()) {
        if (!target_arg.is_none() && to_target(target_arg).name() != p.target_name())
            fail("verify: the program is compiled for target '" + p.target_name() + "', not '" +
                 to_target(target_arg).name() + "'; pass that target or the uncompiled program");
    } else {
        const target& t = target_arg.is_none() ? get_target("cpu") : to_target(target_arg);
        nb::gil_scoped_release release;
        compiled.compile(t, options);
    }
    output_report outputs;
    per_instruction_report instructions;
    {
        nb::gil_scoped_release release;
        // An uncompiled program is its own reference before optimization; a compiled one has only its optimized module.
        outputs = verify_outputs(compiled, *p.get_main_module(), inputs, tol);
        if (per_instruction) instructions = verify_per_instruction(compiled, inputs, tol);
    }
    nb::dict out;
    out["passed"] = outputs.passed() && (!per_instruction || instructions.passed());
    out["target"] = compiled.target_name();
    out["outputs"] = comparison_list(outputs.outputs);
    nb::list float64;
    for (const auto& j : outputs.float64) {
        nb::dict d;
        d["evaluated"] = j.evaluated;
        d["unavailable"] = j.unavailable;
        d["judged"] = j.judged;
        d["rejected"] = j.rejected;
        d["first_rejected"] = j.first_rejected;
        d["worst_target_error"] = j.worst_target_error;
        d["worst_ref_error"] = j.worst_ref_error;
        float64.append(d);
    }
    out["float64"] = float64;  // per output: its judgement against the float64 evaluation
    std::string text = format_output_report(outputs);
    if (per_instruction) {
        out["checked"] = instructions.checked;
        nb::list divergences;
        for (std::size_t i = 0; i < instructions.divergences.size(); ++i)
            divergences.append(divergence_dict(instructions.divergences[i], i == 0));
        out["divergences"] = divergences;
        out["returned"] = comparison_list(instructions.outputs);
        text += "\n" + format_per_instruction_report(instructions);
        if (!outputs.passed() && instructions.passed() && !p.is_compiled())
            text +=
                "every instruction matches its reference compute, yet the outputs differ from the unoptimized "
                "program: a pass changed the numbers; bisect=True names it\n";
    }
    if (per_instruction && holds_quantization(p)) {
        quantization_report q;
        {
            nb::gil_scoped_release release;
            q = verify_quantization(p, {inputs}, &get_target(compiled.target_name()));
        }
        out["quantization"] = quantization_dict(q);
        text += "\n" + format_quantization_report(q);
    }
    out["text"] = text;
    return out;
}

}  // namespace

void bind_verify(nb::module_& m) {
    m.def("verify", verify_program, nb::arg("program"), nb::arg("target") = nb::none(), nb::arg("inputs") = nb::none(),
          nb::kw_only(), nb::arg("rtol") = 1e-4, nb::arg("atol") = 1e-5, nb::arg("per_instruction") = false,
          nb::arg("bisect") = false, nb::arg("options"),
          "Checks a target against the reference target, as `kiln verify` does, and returns a dict whose 'passed' "
          "says whether everything matched within rtol/atol and whose 'text' is the report.\n\n"
          "`program` uncompiled: it is compiled (on a copy) for `target` (default \"cpu\") with the compile "
          "options given as keywords, and its outputs are compared with the uncompiled program on ref. "
          "`program` compiled: its outputs are compared with its optimized module on ref. Inputs not given "
          "get generate_argument data.\n\n"
          "per_instruction=True: also checks every instruction the target runs against its op's reference "
          "compute on the inputs the target gave it; 'divergences' lists those that differ in execution order, "
          "the first with its 'inputs', 'got' and 'expected' values.\n"
          "bisect=True (uncompiled program only): runs the target's passes one at a time, checks each result "
          "on ref against the unoptimized program, then the lowered program; 'stages' lists them and "
          "'first_failure' is the first that breaks the numbers.\n"
          "per_instruction=True on an uncompiled quantized program (quantize / dequantize_linear): also "
          "'quantization', as verify_quantization returns it, computed on the target.");
    m.def("verify_quantization", verify_quantization_program, nb::arg("program"), nb::arg("inputs") = nb::none(),
          nb::arg("target") = nb::none(),
          "Reports how much precision each quantized layer of an uncompiled quantized program loses: its "
          "signal-to-quantization-noise ratio in dB against the float32 program (every "
          "dequantize_linear(quantize_linear(x)) taken as x; weights held only as int8 stay dequantized) on the "
          "same inputs. `inputs`: one {name: array} or a list of them (SQNR sums over all), generated when "
          "omitted. Evaluated on the reference interpreter, or compiled for `target` when given. Returns a dict: "
          "'layers' in program order, each with 'instruction', 'origin' (the ONNX node), 'op', 'output_shape', "
          "'sqnr_db' (its output in the quantized program) and 'own_sqnr_db' (the layer alone, on float32 "
          "inputs); 'worst' (the layers, lowest own_sqnr_db first); 'output_sqnr_db'; 'text'.");
}

}  // namespace kiln::python
