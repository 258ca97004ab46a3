#include "kiln/program.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/extent_independence.hpp"
#include "ir/reshape_lengths_from_input.hpp"
#include "ir/run_time_extents.hpp"
#include "ir/specialisation_cache.hpp"
#include "kiln/pass.hpp"
#include "kiln/specialise.hpp"
#include "kiln/verifier.hpp"

namespace kiln {

program::program() { modules_.push_back(std::make_unique<module>("main")); }

program::program(const program& other) { *this = other; }

program& program::operator=(const program& other) {
    if (this == &other) return *this;
    modules_.clear();
    for (const auto& m : other.modules_) modules_.push_back(std::make_unique<module>(*m));
    // Module arguments of instructions still point into `other`: remap them.
    std::unordered_map<const module*, module_ref> mapping;
    for (std::size_t i = 0; i < modules_.size(); ++i) mapping[other.modules_[i].get()] = modules_[i].get();
    for (auto& m : modules_) m->remap_module_inputs(mapping);
    target_name_ = other.target_name_;
    target_memory_ = other.target_memory_;
    options_ = other.options_;
    executable_ = other.executable_;
    specialiser_ = other.specialiser_;
    range_outputs_ = other.range_outputs_;
    dynamic_parameters_ = other.dynamic_parameters_;
    specialisations_ = other.specialisations_;
    compiled_from_cache_ = other.compiled_from_cache_;
    return *this;
}

void program::adopt_cached(program&& compiled) {
    if (!compiled.is_compiled() || compiled.is_dynamic())
        fail(error_kind::runtime, "adopt_cached: expected a compiled static program");
    restore_modules(compiled);
    target_name_ = std::move(compiled.target_name_);
    target_memory_ = compiled.target_memory_;
    options_ = std::move(compiled.options_);
    executable_ = std::move(compiled.executable_);
    compiled_from_cache_ = true;
}

module* program::create_module(const std::string& name) {
    if (get_module(name) != nullptr) fail("program already has a module named '" + name + "'");
    modules_.push_back(std::make_unique<module>(name));
    return modules_.back().get();
}

module* program::get_module(const std::string& name) {
    for (auto& m : modules_)
        if (m->name() == name) return m.get();
    return nullptr;
}

const module* program::get_module(const std::string& name) const {
    return const_cast<program*>(this)->get_module(name);
}

std::vector<const module*> program::get_modules() const {
    std::vector<const module*> out;
    for (const auto& m : modules_) out.push_back(m.get());
    return out;
}

void program::remove_modules(const std::vector<const module*>& modules) {
    auto doomed = [&](const module* m) { return std::find(modules.begin(), modules.end(), m) != modules.end(); };
    for (const module* m : modules)
        if (m == get_main_module()) fail("remove_modules: the main module cannot be removed");
    for (const auto& m : modules_) {
        if (doomed(m.get())) continue;
        for (const auto& ins : *m)
            for (const module* sub : ins.module_inputs())
                if (doomed(sub))
                    fail("remove_modules: module '" + sub->name() + "' is still used by module '" + m->name() + "'");
    }
    std::erase_if(modules_, [&](const std::unique_ptr<module>& m) { return doomed(m.get()); });
}

namespace {

// The ranges that cover both static shapes (the results at the smallest and
// at the largest extents).
shape covering_shape(const shape& smallest, const shape& largest) {
    if (smallest.type() != largest.type() || smallest.ndim() != largest.ndim() || smallest.is_tuple()) return largest;
    std::vector<dynamic_dimension> dims;
    for (std::size_t i = 0; i < smallest.ndim(); ++i) {
        auto [lo, hi] = std::minmax(smallest.lens()[i], largest.lens()[i]);
        dims.emplace_back(lo, hi);
    }
    return shape::from_dyn_dims(largest.type(), dims);
}

// The parameters with each dynamic dimension whose range starts at 1
// starting at 2 instead (its optimals at 1 dropped), or nothing where none
// does or a range would be one length. `inner_only`: only dimensions after
// the first (a sequence, not a batch).
std::optional<std::map<std::string, shape>> ranges_from_two(std::map<std::string, shape> parameters, bool inner_only) {
    bool raised = false;
    for (auto& [name, s] : parameters) {
        if (!s.dynamic()) continue;
        auto dims = s.dyn_dims();
        for (std::size_t i = 0; i < dims.size(); ++i) {
            auto& d = dims[i];
            if (d.is_fixed() || d.min != 1 || (inner_only && i == 0)) continue;
            if (d.max < 3) return std::nullopt;
            std::vector<std::size_t> optimals;
            std::copy_if(d.optimals.begin(), d.optimals.end(), std::back_inserter(optimals),
                         [](std::size_t o) { return o >= 2; });
            d = dynamic_dimension(2, d.max, std::move(optimals));
            raised = true;
        }
        s = shape::from_dyn_dims(s.type(), dims);
    }
    if (!raised) return std::nullopt;
    return parameters;
}

// The parameters with every dimension ranges_from_two raised (in `raised`)
// fixed at 1, when that leaves a range: the slice the raised ranges left out.
std::optional<std::map<std::string, shape>> lengths_of_one_left_out(const std::map<std::string, shape>& parameters,
                                                                    const std::map<std::string, shape>& raised) {
    auto out = parameters;
    bool ranged = false;
    for (auto& [name, s] : out) {
        if (!s.dynamic()) continue;
        auto dims = s.dyn_dims();
        const auto raised_dims = raised.at(name).dyn_dims();
        for (std::size_t i = 0; i < dims.size(); ++i) {
            if (raised_dims[i].min != dims[i].min) dims[i] = dynamic_dimension(1);
            ranged = ranged || !dims[i].is_fixed();
        }
        s = shape::from_dyn_dims(s.type(), dims);
    }
    if (!ranged) return std::nullopt;
    return out;
}

// covering_shape of each output.
std::vector<shape> covering_shapes(const std::vector<shape>& smallest, const std::vector<shape>& largest) {
    std::vector<shape> out;
    for (std::size_t i = 0; i < largest.size(); ++i) out.push_back(covering_shape(smallest.at(i), largest[i]));
    return out;
}

// Whether the literals of `larger` and `smaller` (the module at the larger
// and at the smaller extent) have the same dtypes and lengths up to the
// order of their dimensions (a weight laid out [N, K] at one end and [K, N]
// at the other), but for literals of `smaller` that are the leading part of
// one of `larger`'s (positions folded at each length, which follow the
// extent): a literal whose values depend on the extent otherwise (a scale
// 1 / n) differs anyway, whatever layout passes run.
bool literal_lengths_match_up_to_order(const module& larger, const module& smaller) {
    using lengths = std::pair<dtype, std::vector<std::size_t>>;
    auto sorted_lengths = [](const instruction& ins) {
        auto lens = ins.get_shape().lens();
        std::sort(lens.begin(), lens.end());
        return lengths{ins.get_shape().type(), std::move(lens)};
    };
    std::multimap<lengths, const instruction*> unmatched;
    for (const auto& ins : larger)
        if (ins.is_literal()) unmatched.emplace(sorted_lengths(ins), &ins);
    std::vector<const instruction*> cut_short;
    for (const auto& ins : smaller) {
        if (!ins.is_literal()) continue;
        auto found = unmatched.find(sorted_lengths(ins));
        if (found != unmatched.end())
            unmatched.erase(found);
        else
            cut_short.push_back(&ins);
    }
    for (const instruction* part : cut_short) {
        auto whole = std::find_if(unmatched.begin(), unmatched.end(), [&](const auto& entry) {
            return is_leading_part_of(part->get_literal(), entry.second->get_literal());
        });
        if (whole == unmatched.end()) return false;
        unmatched.erase(whole);
    }
    return unmatched.empty();
}

// A model of a few hundred bytes can ask for any amount of memory (an 18 GB
// ConstantOfShape a relu reads): refuse it at compile time, naming the
// largest value, instead of running the process out of memory.
void check_memory_limit(const module& main, const executable& e, const compile_options& options) {
    const std::size_t limit = options.max_memory_bytes > 0 ? options.max_memory_bytes : physical_memory_bytes() / 2;
    std::size_t output_bytes = 0;
    const instruction* largest = nullptr;
    for (const auto& ins : main) {
        if (ins.is_return())
            for (const auto& in : ins.inputs()) output_bytes += in->get_shape().elements() * in->get_shape().element_size();
        else if (!ins.is_param() && !ins.is_literal() &&
                 ins.get_operator().output_alias(ins.input_shapes()) < 0 &&  // views take no memory of their own
                 (largest == nullptr || ins.get_shape().elements() * ins.get_shape().element_size() >
                                            largest->get_shape().elements() * largest->get_shape().element_size()))
            largest = &ins;
    }
    const std::size_t largest_bytes =
        largest ? largest->get_shape().elements() * largest->get_shape().element_size() : 0;
    const std::size_t needed = std::max(e.planned_memory_bytes() + output_bytes, largest_bytes);
    if (needed <= limit) return;
    const std::string what = largest ? "; its largest value is " + main.instruction_names().at(largest) + " = " +
                                           largest->name() + " -> " + to_string(largest->get_shape())
                                     : "";
    fail(error_kind::invalid_argument,
         "compile: a run would need " + std::to_string(needed) + " bytes (planned intermediates " +
             std::to_string(e.planned_memory_bytes()) + ", outputs " + std::to_string(output_bytes) +
             "), more than the limit of " + std::to_string(limit) + " bytes (compile option max_memory_bytes" +
             (options.max_memory_bytes > 0 ? "" : ", by default half of this machine's memory") +
             ")" + what);
}

}  // namespace

void program::fail_if_compiled() const {
    if (is_compiled())
        fail("program is already compiled for target '" + target_name_ + "'; compile a copy of the original instead");
}

// program::compile stands above the IR, with the compile cache
// (src/io/cached_compile.cpp), and comes here for every compile without
// cache_dir, a dynamic program's included, and for a cache miss.
void program::compile_uncached(const target& t, const compile_options& options) {
    fail_if_compiled();
    verify_program(*this, "before compile");
    if (is_dynamic()) {
        compile_dynamic(t, options);
        return;
    }
    // The passes rewrite the modules in place: a compile that fails (a
    // lowering error, the memory limit) gives the program back as it was.
    const program before(*this);
    try {
        compile_in_place(t, options);
    } catch (...) {
        restore_modules(before);
        throw;
    }
}

// Puts the modules' contents back into the same module objects, which callers
// (the Python API) may hold.
void program::restore_modules(const program& saved) {
    if (saved.modules_.size() != modules_.size()) {
        *this = saved;
        return;
    }
    std::unordered_map<const module*, module_ref> mapping;
    for (std::size_t i = 0; i < modules_.size(); ++i) {
        *modules_[i] = *saved.modules_[i];
        mapping[saved.modules_[i].get()] = modules_[i].get();
    }
    for (auto& m : modules_) m->remap_module_inputs(mapping);
}

void program::compile_in_place(const target& t, const compile_options& options) {
    module& main = *get_main_module();
    pass_list passes = t.get_passes(options);
    // Submodules (branches, loop bodies) are optimized like main. Passes keep
    // a module's parameters and output shapes, so the order does not matter
    // to the instructions that take them.
    for (const module* sub : main.submodules()) run_passes(*get_module(sub->name()), passes, options);
    run_passes(main, passes, options);
    auto lowered = t.lower(main, options);
    check_memory_limit(main, *lowered, options);
    executable_ = std::move(lowered);
    target_name_ = t.name();
    target_memory_ = t.memory();
    options_ = options;
}

void program::compile_dynamic(const target& t, const compile_options& options) {
    // Lowers a program whose passes have run: the second half of compile_in_place.
    auto lower_optimised = [](program& p, const target& on, const compile_options& with) {
        module& main = *p.get_main_module();
        auto lowered = on.lower(main, with);
        check_memory_limit(main, *lowered, with);
        p.executable_ = std::move(lowered);
        p.target_name_ = on.name();
        p.target_memory_ = on.memory();
        p.options_ = with;
    };
    // Static programs built while trying the generic one (optimised, and
    // lowered where it got that far), by extents: a fallback pins them
    // instead of compiling them again.
    std::map<parameter_lens, program> built;
    // The program compiled once at the range's maximum and run at each run's
    // extents (ir/run_time_extents.hpp), or null where that would not be exact:
    // then each set of extents is a static specialisation, as before.
    // (A lambda: it sets the compiled program's executable.)
    std::string per_shape_reason;
    // Whether the last attempt found the program optimised at the range's
    // ends to be different graphs.
    bool ends_differ = false;
    // The front end's imports, and the programs optimised from them (by
    // whether layouts serve every extent), kept for later attempts (an
    // import from PyTorch lowers the graph again; copies share the
    // constants' bytes).
    std::map<parameter_lens, program> imported;
    std::map<std::pair<bool, parameter_lens>, program> optimised;
    // Whether an attempt made without the one-layout retry (below) found
    // ends that a retry could have made the same.
    bool layout_retry_wanted = false;
    auto compiled_for_run_time_extents = [&](const program& source, const target& on, const compile_options& asked,
                                             const std::map<std::string, shape>& parameters,
                                             bool retry_one_layout) -> std::shared_ptr<const program> {
        ends_differ = false;
        compile_options with = asked;
        with.layouts_within_a_range = true;
        parameter_lens at_max;
        parameter_lens at_min;
        for (const auto& [name, s] : parameters) {
            if (!s.dynamic()) continue;
            at_max.emplace(name, s.max_lens());
            at_min.emplace(name, s.min_lens());
        }
        std::vector<extent_range> ranges;
        const auto extent_dims = extent_dimensions(parameters, ranges, per_shape_reason);
        if (extent_dims.empty()) return nullptr;
        try {
            // Values must not depend on the extent (ir/extent_independence.hpp):
            // the program optimised at the range's two ends must be the same
            // graph but for its lengths. A value folded from the extent (a
            // scale, positions, a mask, a mean's divisor, a threshold) that
            // differs anywhere between the ends differs there too.
            // One attempt with these options, keeping the optimised static
            // programs in `keep`; false in compared_equal when the ends differ.
            bool compared_equal = true;
            // What get_output_shapes would import them for again.
            auto note_range_outputs = [this](const program& low, const program& high) {
                const std::lock_guard<std::mutex> lock(range_outputs_->mutex);
                if (range_outputs_->found || !specialiser_) return;
                range_outputs_->shapes = covering_shapes(low.get_output_shapes(), high.get_output_shapes());
                range_outputs_->found = true;
            };
            auto attempt = [&](const compile_options& opts,
                               std::map<parameter_lens, program>& keep) -> std::shared_ptr<const program> {
                const pass_list passes = on.get_passes(opts);
                auto optimised_at = [&](const parameter_lens& lens) -> program& {
                    auto found = imported.find(lens);
                    if (found == imported.end())
                        found = imported.emplace(lens, source.imported_static_program(lens)).first;
                    const std::pair<bool, parameter_lens> key{opts.layouts_for_every_extent, lens};
                    auto done = optimised.find(key);
                    if (done == optimised.end()) {
                        program p = found->second;
                        if (!p.get_main_module()->submodules().empty()) fail("submodules are not compared");
                        run_passes(*p.get_main_module(), passes, opts);
                        // A reshape's lengths folded from the extent ([batch, seq, -1, 64]) copy the input's instead.
                        write_reshape_lengths_copied_from_input(*p.get_main_module());
                        done = optimised.emplace(key, std::move(p)).first;
                    }
                    return keep.insert_or_assign(lens, program(done->second)).first->second;
                };
                const program& smallest = optimised_at(at_min);
                program& largest = optimised_at(at_max);
                note_range_outputs(imported.at(at_min), imported.at(at_max));
                adopt_reshapes_that_fit_both(*largest.get_main_module(), *smallest.get_main_module());
                bool literals_vary = false;
                const std::string difference = first_difference_besides_extents(
                    *largest.get_main_module(), *smallest.get_main_module(), &literals_vary);
                if (!difference.empty()) {
                    per_shape_reason = "the program optimised at the range's two ends differs: " + difference;
                    compared_equal = false;
                    return nullptr;
                }
                // A constant cut short at the minimum (positions 0..e-1
                // folded) must be the same cut at each extent's middle too,
                // so that it follows that extent as a * e + b there as well;
                // where one extent is at its minimum and the others at their
                // maxima, its lengths follow from those (extent_plan::derive).
                std::vector<const module*> literals_at_probes;
                if (literals_vary) {
                    const auto probes = extent_plan::probe_extents(ranges);
                    for (std::size_t k = 0; k < probes.size(); ++k) {
                        if (k == 0 || k + 1 == probes.size()) {
                            literals_at_probes.push_back((k == 0 ? smallest : largest).get_main_module());
                            continue;
                        }
                        const extent_lengths& e = probes[k];
                        std::size_t below = 0;
                        while (e[below] == ranges[below].max) ++below;
                        if (e[below] == ranges[below].min) {
                            literals_at_probes.push_back(nullptr);
                            continue;
                        }
                        parameter_lens at_e = at_max;
                        for (const auto& d : extent_dims) at_e.at(d.name).at(d.dim) = e[d.extent];
                        const program& middle = optimised_at(at_e);
                        bool unused_flag = false;
                        const std::string at_middle = first_difference_besides_extents(
                            *largest.get_main_module(), *middle.get_main_module(), &unused_flag);
                        if (!at_middle.empty()) {
                            per_shape_reason = "the program optimised at extents " + to_string(e) +
                                               " differs from the one at the maxima: " + at_middle;
                            compared_equal = false;
                            return nullptr;
                        }
                        literals_at_probes.push_back(middle.get_main_module());
                    }
                }
                std::string why;
                auto plan = extent_plan::derive(*largest.get_main_module(), parameters, why, literals_at_probes);
                if (!plan) {
                    per_shape_reason = why;
                    return nullptr;
                }
                lower_optimised(largest, on, opts);
                const auto* runner = dynamic_cast<const runs_at_extents*>(largest.executable_.get());
                if (runner == nullptr) {
                    per_shape_reason = "target '" + on.name() + "' runs no program at run-time extents";
                    return nullptr;
                }
                const std::string cannot = runner->cannot_vary(plan->varying_by_value());
                if (!cannot.empty()) {
                    per_shape_reason = cannot;
                    return nullptr;
                }
                program compiled = std::move(largest);
                compiled.executable_ =
                    std::make_shared<run_time_extent_executable>(compiled.executable_, std::move(*plan), parameters);
                return std::make_shared<const program>(std::move(compiled));
            };
            if (auto generic = attempt(with, built)) return generic;
            // A layout the target picks by a length (the cpu target keeps
            // product weights [N, K] for its few-row column loops, row-major
            // for oneDNN) makes the ends differ in layout only, not in
            // values: once more with the passes that choose it choosing one
            // layout for every extent (the largest extents'). The fallback
            // keeps the first attempt's programs, optimised as a static
            // compile would.
            const auto& disabled = with.disabled_passes;
            std::vector<std::string> by_length;
            for (const auto& name : on.passes_choosing_layout_by_length())
                if (std::find(disabled.begin(), disabled.end(), name) == disabled.end()) by_length.push_back(name);
            ends_differ = !compared_equal;
            if (compared_equal || by_length.empty() ||
                !literal_lengths_match_up_to_order(*built.at(at_max).get_main_module(),
                                                   *built.at(at_min).get_main_module()))
                return nullptr;
            if (!retry_one_layout) {
                layout_retry_wanted = true;
                return nullptr;
            }
            const std::string first_reason = per_shape_reason;
            compile_options one_layout = with;
            one_layout.layouts_for_every_extent = true;
            std::map<parameter_lens, program> retried;
            compared_equal = true;
            if (auto generic = attempt(one_layout, retried)) return generic;
            if (!compared_equal) per_shape_reason = first_reason;
            ends_differ = !compared_equal;
            return nullptr;
        } catch (const error& e) {
            per_shape_reason = e.what();
            return nullptr;  // (the memory limit at the maximum): each extent compiles on its own
        }
    };
    // Specialisations start from the program as it is now; targets live as
    // long as the process, so looking one up again by name is safe later.
    auto source = std::make_shared<const program>(*this);
    auto make = [source, name = t.name(), options](const parameter_lens& lens) {
        program p = source->imported_static_program(lens);
        // The public compile: with cache_dir, each specialisation is a static
        // program that the compile cache keeps.
        p.compile(get_target(name), options);
        return std::make_shared<const program>(std::move(p));
    };
    constexpr std::size_t kept_besides_optimals = 8;
    auto cache = std::make_shared<specialisation_cache>(make, kept_besides_optimals);
    // Length 1 is special to the passes (a transpose that moves only it is
    // a reshape, and at a batch of 4 [4, 12, 1, 64] keeps the reshapes that
    // the longer lengths merge): where the ends differ, the range from 2
    // is one program and length 1 compiles on its own. A sequence's (a
    // dimension after the first) is tried first, so that a batch of 1
    // stays the one program's.
    // The retry in one layout comes only after those cuts failed without
    // it: where length 1 differs otherwise (GPT-2's attention), the cuts
    // succeed and no second layout of the maximum is optimised, and the
    // slice at length 1 keeps the layout its few rows run fastest in.
    std::shared_ptr<const program> generic;
    std::shared_ptr<const program> at_one;  // the lengths of 1 left out, where they are a range of their own
    std::string whole_range_reason;
    for (const bool retry_one_layout : {false, true}) {
        if (retry_one_layout && !layout_retry_wanted) break;
        generic = compiled_for_run_time_extents(*source, t, options, source->get_parameter_shapes(), retry_one_layout);
        whole_range_reason = per_shape_reason;
        for (const bool inner_only : {true, false}) {
            const auto from_two = ranges_from_two(source->get_parameter_shapes(), inner_only);
            if (generic || !ends_differ || !from_two) continue;
            generic = compiled_for_run_time_extents(*source, t, options, *from_two, retry_one_layout);
            // At a batch of 1 BERT is another graph, and is one program for
            // its sequences: batch 1 x sequence 2..512 beside 2..64 x 2..512.
            // (The slice retries in one layout at once: nothing is left to cut.)
            const auto slice = lengths_of_one_left_out(source->get_parameter_shapes(), *from_two);
            if (generic && slice) at_one = compiled_for_run_time_extents(*source, t, options, *slice, true);
        }
        if (generic) break;
    }
    per_shape_reason = generic ? "" : whole_range_reason;
    for (auto& one : {generic, at_one}) {
        if (!one) continue;
        const auto& plan = dynamic_cast<const run_time_extent_executable&>(*one->executable_).plan();
        cache->add_generic(one, [plan](const parameter_lens& lens) { return plan.serves(lens); });
    }
    if (!generic) {
        cache->set_per_shape_reason(per_shape_reason);
        // Compiling the optimal profiles now reports lowering errors at compile
        // time. One the generic attempt optimised already is lowered, not
        // compiled again (unless the compile cache is to keep it).
        for (const auto& profile : optimal_profiles()) {
            auto found = built.find(profile);
            if (found == built.end() || !options.cache_dir.empty()) {
                cache->pin(profile);
                continue;
            }
            program& p = found->second;
            if (p.executable_ == nullptr) lower_optimised(p, t, options);
            cache->pin(profile, std::make_shared<const program>(std::move(p)));
        }
    }
    specialisations_ = std::move(cache);
    target_name_ = t.name();
    target_memory_ = t.memory();
    options_ = options;
}

program program::imported_static_program(const parameter_lens& lens) const {
    // A front end's main module is its import at the first optimal profile
    // (set_specialiser): a copy of it saves importing the model again.
    const auto imported = get_main_module()->get_parameter_shapes();
    bool same = specialiser_ != nullptr;
    for (const auto& [name, l] : lens) {
        auto it = imported.find(name);
        same = same && it != imported.end() && !it->second.dynamic() && it->second.lens() == l;
    }
    if (!same) return static_program(lens);
    program p = *this;
    p.specialiser_.reset();
    p.dynamic_parameters_.clear();
    p.specialisations_.reset();
    return p;
}

program program::static_program(const parameter_lens& lens) const {
    if (specialiser_) {
        program p = specialiser_->specialise(lens);
        if (p.is_dynamic()) fail("specialiser '" + specialiser_->kind() + "' returned a dynamic program");
        return p;
    }
    // A module built over ranges: its static copy at these extents, whose
    // module arguments then point at the copied program's modules.
    program p;
    p.modules_.clear();
    std::unordered_map<const module*, module_ref> mapping;
    for (const auto& m : modules_) {
        if (m.get() == get_main_module()) {
            const module specialised = specialise(*m, lens);
            p.modules_.push_back(std::make_unique<module>(specialised));
        } else {
            p.modules_.push_back(std::make_unique<module>(*m));
        }
        mapping[m.get()] = p.modules_.back().get();
    }
    for (auto& m : p.modules_) m->remap_module_inputs(mapping);
    return p;
}

bool program::is_dynamic() const {
    if (!dynamic_parameters_.empty()) return true;
    for (const auto& [name, s] : get_main_module()->get_parameter_shapes())
        if (s.dynamic()) return true;
    return false;
}

void program::set_specialiser(std::shared_ptr<const specialiser> s, std::map<std::string, shape> dynamic_parameters) {
    if (is_compiled()) fail("set_specialiser: the program is already compiled");
    auto statics = get_main_module()->get_parameter_shapes();
    for (const auto& [name, dyn] : dynamic_parameters) {
        auto it = statics.find(name);
        if (it == statics.end()) fail("set_specialiser: the program has no parameter '" + name + "'");
        if (it->second.type() != dyn.type() || it->second.ndim() != dyn.ndim())
            fail("set_specialiser: parameter '" + name + "' is " + to_string(it->second) + ", its range " +
                 to_string(dyn));
    }
    specialiser_ = std::move(s);
    range_outputs_ = std::make_shared<range_output_shapes>();
    dynamic_parameters_ = std::move(dynamic_parameters);
}

namespace {

// The input for parameter `name`, of its dtype and of extents its shape accepts.
const argument& checked_input(const std::string& name, const shape& expected, const parameter_map& inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) fail("missing input for parameter '" + name + "' (" + to_string(expected) + ")");
    const shape& got = it->second.get_shape();
    if (got.type() != expected.type())
        fail(error_kind::type_error, "parameter '" + name + "': expected dtype " + to_string(expected.type()) +
                                         ", got " + to_string(got.type()));
    if (expected.accepts(got.lens())) return it->second;
    if (!expected.dynamic())
        fail("parameter '" + name + "': expected shape " + to_string(expected.lens()) + ", got " +
             to_string(got.lens()));
    std::string range;
    for (const auto& d : expected.dyn_dims()) range += (range.empty() ? "" : ", ") + to_string(d);
    fail("parameter '" + name + "': extents " + to_string(got.lens()) + " are outside the range {" + range + "}");
}

// Every input present, of its parameter's dtype and of extents its shape accepts.
parameter_map check_inputs_against(const std::map<std::string, shape>& shapes, const parameter_map& inputs) {
    for (const auto& [name, arg] : inputs)
        if (!shapes.count(name)) {
            std::string known;
            for (const auto& [n, s] : shapes) known += (known.empty() ? "" : ", ") + n;
            fail("unknown parameter '" + name +
                 "'; the program's parameters are: " + (known.empty() ? "(none)" : known));
        }
    parameter_map checked;
    for (const auto& [name, expected] : shapes) {
        const argument& given = checked_input(name, expected, inputs);
        const shape& got = given.get_shape();
        if (given.data() == nullptr && got.elements() != 0) fail("parameter '" + name + "': argument has no data");
        checked.emplace(name, got.standard() ? given : given.contiguous());
    }
    return checked;
}

// The dynamic parameters' shapes of a program.
std::map<std::string, shape> dynamic_shapes(const std::map<std::string, shape>& parameters) {
    std::map<std::string, shape> out;
    for (const auto& [name, s] : parameters)
        if (s.dynamic()) out.emplace(name, s);
    return out;
}

}  // namespace

std::vector<parameter_lens> optimal_profiles(const std::map<std::string, shape>& parameters) {
    auto dynamic = dynamic_shapes(parameters);
    std::size_t count = 1;
    for (const auto& [name, s] : dynamic)
        for (const auto& d : s.dyn_dims()) count = std::max(count, d.optimals.size());
    std::vector<parameter_lens> profiles(count);
    for (std::size_t k = 0; k < count; ++k)
        for (const auto& [name, s] : dynamic) {
            auto& lens = profiles[k][name];
            for (const auto& d : s.dyn_dims())
                lens.push_back(d.optimals.empty() ? d.min : d.optimals[std::min(k, d.optimals.size() - 1)]);
        }
    profiles.erase(std::unique(profiles.begin(), profiles.end()), profiles.end());
    return profiles;
}

std::shared_ptr<const program> program::specialisation_for(const parameter_map& inputs) const {
    if (!is_compiled())
        fail("program is not compiled: call compile(get_target(\"cpu\")) (or \"ref\") before running it");
    // A static program runs itself: an aliasing pointer that owns nothing.
    if (!specialisations_) return std::shared_ptr<const program>(std::shared_ptr<const program>{}, this);
    parameter_lens lens;
    for (const auto& [name, expected] : dynamic_shapes(get_parameter_shapes()))
        lens.emplace(name, checked_input(name, expected, inputs).get_shape().lens());
    return specialisations_->get(lens);
}

program program::specialised_for(const parameter_map& inputs) const {
    std::shared_ptr<const program> running;
    if (is_compiled() && specialisations_) {
        running = specialisation_for(inputs);
        if (dynamic_cast<const run_time_extent_executable*>(running->executable_.get()) == nullptr) return *running;
    }
    if (!is_dynamic()) return *this;
    parameter_lens lens;
    for (const auto& [name, expected] : dynamic_shapes(get_parameter_shapes()))
        lens.emplace(name, checked_input(name, expected, inputs).get_shape().lens());
    program out = static_program(lens);
    // The one program compiled for the range runs its module at other
    // shapes; a check against ref wants the static program of these extents.
    if (running) out.compile(get_target(target_name_), options_);
    return out;
}

std::size_t program::specialisation_count() const { return specialisations_ ? specialisations_->size() : 0; }

std::string program::per_shape_compilation_reason() const {
    return specialisations_ ? specialisations_->per_shape_reason() : std::string{};
}

const program& program::running_program(const parameter_map& inputs, std::shared_ptr<const program>& holder) const {
    if (!specialisations_) return *this;
    holder = specialisation_for(inputs);
    return *holder;
}

void program::lower_compiled(const std::string& target_name, const compile_options& options) {
    const target& t = get_target(target_name);
    verify_program(*this, "in a compiled program");
    executable_ = t.lower(*get_main_module(), options);
    target_name_ = target_name;
    target_memory_ = t.memory();
    options_ = options;
}

std::vector<argument> program::eval(const parameter_map& inputs) const {
    std::shared_ptr<const program> holder;
    if (const program& p = running_program(inputs, holder); &p != this) return p.eval(inputs);
    parameter_map checked = checked_inputs(inputs);
    return executable_->run(checked);
}

std::vector<argument> program::eval(const parameter_map& inputs, device_stream stream) const {
    std::shared_ptr<const program> holder;
    if (const program& p = running_program(inputs, holder); &p != this) return p.eval(inputs, stream);
    parameter_map checked = checked_inputs(inputs);
    if (target_memory_ == memory_location::host && stream.handle != nullptr)
        fail("a device stream was given, but the program runs on the '" + target_name_ +
             "' target, which runs on the host and takes no stream; run it without one");
    return executable_->run_on_stream(checked, stream);
}

std::vector<argument> program::eval_profiled(const parameter_map& inputs, std::vector<step_timing>& timings) const {
    std::shared_ptr<const program> holder;
    if (const program& p = running_program(inputs, holder); &p != this) return p.eval_profiled(inputs, timings);
    parameter_map checked = checked_inputs(inputs);
    return executable_->run_profiled(checked, timings);
}

std::vector<argument> program::eval_observed(const parameter_map& inputs, const step_observer& observe) const {
    std::shared_ptr<const program> holder;
    if (const program& p = running_program(inputs, holder); &p != this) return p.eval_observed(inputs, observe);
    parameter_map checked = checked_inputs(inputs);
    return executable_->run_observed(checked, observe);
}

parameter_map program::checked_inputs(const parameter_map& inputs) const {
    if (!is_compiled())
        fail("program is not compiled: call compile(get_target(\"cpu\")) (or \"ref\") before running it");
    // A host target would read a device pointer as host memory.
    for (const auto& [name, arg] : inputs)
        if (arg.location() == memory_location::device && target_memory_ == memory_location::host)
            fail("parameter '" + name + "': the argument is in a device's memory, and the program runs on the '" +
                 target_name_ + "' target, which reads host memory; copy it to the host first");
    // Compiled once for a range: the ranges, not the compiled extents, say what it accepts.
    if (const auto* generic = dynamic_cast<const run_time_extent_executable*>(executable_.get()))
        return check_inputs_against(generic->parameter_shapes(), inputs);
    return check_inputs(*get_main_module(), inputs);
}

parameter_map check_inputs(const module& main, const parameter_map& inputs) {
    return check_inputs_against(main.get_parameter_shapes(), inputs);
}


std::vector<std::string> program::get_parameter_names() const { return get_main_module()->get_parameter_names(); }

std::map<std::string, shape> program::get_parameter_shapes() const {
    auto shapes = get_main_module()->get_parameter_shapes();
    for (const auto& [name, s] : dynamic_parameters_) shapes.insert_or_assign(name, s);
    return shapes;
}

std::vector<shape> program::get_output_shapes() const {
    if (!specialiser_) return get_main_module()->get_output_shapes();
    // A front end's import at the range's ends (PyTorch's lowers its graph
    // again), once per specialiser: its main module is not edited after.
    const std::lock_guard<std::mutex> lock(range_outputs_->mutex);
    if (range_outputs_->found) return range_outputs_->shapes;
    parameter_lens smallest;
    parameter_lens largest;
    for (const auto& [name, s] : dynamic_parameters_) {
        smallest[name] = s.min_lens();
        largest[name] = s.max_lens();
    }
    range_outputs_->shapes =
        covering_shapes(static_program(smallest).get_output_shapes(), static_program(largest).get_output_shapes());
    range_outputs_->found = true;
    return range_outputs_->shapes;
}

const program& program::representative() const {
    if (!specialisations_) return *this;
    return *specialisations_->get(optimal_profiles().front());
}

std::size_t program::planned_memory_bytes() const {
    const program& p = representative();
    return p.executable_ ? p.executable_->planned_memory_bytes() : 0;
}

std::size_t program::held_literal_bytes() const {
    std::unordered_set<const std::byte*> counted;
    std::size_t bytes = 0;
    for (const auto& m : modules_)
        for (const auto& ins : *m)
            if (ins.is_literal() && ins.get_literal().holds_bytes()) {
                argument values = ins.get_literal().get_argument();
                if (counted.insert(values.data()).second) bytes += values.get_shape().bytes();
            }
    return bytes;
}

std::size_t program::kernel_constant_bytes() const {
    const program& p = representative();
    return p.executable_ ? p.executable_->kernel_constant_bytes() : 0;
}

std::size_t program::adopted_constant_bytes() const {
    const program& p = representative();
    return p.executable_ ? p.executable_->adopted_constant_bytes() : 0;
}

std::vector<kernel_choice> program::kernel_choices() const {
    const program& p = representative();
    return p.executable_ ? p.executable_->kernel_choices() : std::vector<kernel_choice>{};
}

void program::print(std::ostream& os) const {
    if (specialiser_) {
        // The main module of an imported dynamic program is one specialisation of it.
        os << "dynamic parameters:";
        for (const auto& [name, s] : dynamic_parameters_) os << " " << name << ": " << to_string(s) << ";";
        os << " the modules below are specialised at the first optimal profile\n";
    }
    for (std::size_t i = 0; i < modules_.size(); ++i) {
        if (i) os << "\n";
        modules_[i]->print(os);
    }
}

std::string to_string(const program& p) {
    std::ostringstream os;
    p.print(os);
    return os.str();
}

std::ostream& operator<<(std::ostream& os, const program& p) {
    p.print(os);
    return os;
}

}  // namespace kiln
