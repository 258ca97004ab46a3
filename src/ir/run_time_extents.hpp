#pragma once
// One compiled program for every extent of a dynamic dimension: the program
// is compiled once at the range's maximum (memory planned for it, weights
// packed once), and each run hands every instruction its actual shape.
//
// extent_plan says how each instruction's shape follows the run-time extent
// e of the program's one dynamic dimension (or of several with one range,
// such as the batch of BERT's input_ids and attention_mask, which the model
// needs equal: they are taken as one extent, and a run where they differ is
// not this plan's): each length is a * e + b, found
// by running compute_shape over the compiled module at the range's minimum,
// middle and maximum. It refuses (and the program keeps its cache of static
// specialisations) wherever that would not be exact: an op whose shape
// cannot follow e (an attribute fixed at the maximum), a value that varies
// in more than one dimension or whose layout changes kind with e, a view
// whose place in its source moves with e, a constant whose strides do.
//
// At each extent a value is laid out as compute_shape gives it there, in
// the buffer planned for the maximum: where every dimension before the
// varying one has length 1 that is a leading part of the maximum's layout
// (a kernel may skip rows); where one is longer (a sequence at batch 4,
// the keys of a cache behind its heads) the strides change with e
// (varying_dimension::moves_strides) and a kernel must take them from its
// arguments.
//
// An executable that can run this way implements runs_at_extents; a target
// that cannot says why for each instruction it would have to vary.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/module.hpp"
#include "kiln/program.hpp"
#include "kiln/target.hpp"

namespace kiln {

// How one value follows the extent: lens[dim] = scale * e + offset.
struct varying_dimension {
    std::size_t dim = 0;
    std::int64_t scale = 0;
    std::int64_t offset = 0;
    // Whether the stride of a dimension longer than one changes with e (the
    // value is then no leading part of its layout at the maximum).
    bool moves_strides = false;
};

// A dynamic dimension of an input: parameter `name`'s dimension `dim`.
struct input_dimension {
    std::string name;
    std::size_t dim = 0;
};

// The dynamic dimensions of `parameters` when they can be one run-time
// extent (one, or several with the same range); empty with the reason in
// `why` otherwise.
std::vector<input_dimension> one_extent_dimensions(const std::map<std::string, shape>& parameters, std::string& why);

class extent_plan {
public:
    // The plan for `compiled` (the main module compiled at the maximum of the
    // one extent of `dynamic_parameters`), or nullopt with the reason in `why`.
    // A literal follows the extent only where `literals_at_probes` holds the
    // module optimised at each of probe_extents (instruction for instruction
    // the same graph as `compiled`): its lengths there are the literal's.
    static std::optional<extent_plan> derive(const module& compiled,
                                             const std::map<std::string, shape>& dynamic_parameters, std::string& why,
                                             const std::vector<const module*>& literals_at_probes = {});
    // The extents a plan is derived at: the range's ends and its middle (a
    // length that is a * e + b at two of them and not at the third is not).
    static std::vector<std::size_t> probe_extents(std::size_t min, std::size_t max);

    // Per instruction of the compiled module, in order: how it varies, if it does.
    const std::vector<std::optional<varying_dimension>>& varying() const { return varying_; }
    // The run-time extent given by `inputs` (checked against the ranges by
    // the caller); an error naming the inputs when the dimensions that are
    // one extent differ.
    std::size_t extent_of(const parameter_map& inputs) const;
    // Whether the dimensions that are one extent have one length in `lens`,
    // inside the plan's range.
    bool serves(const parameter_lens& lens) const;
    // The shape of every instruction at extent `e`.
    std::vector<shape> shapes_at(std::size_t e) const;
    std::size_t max_extent() const { return max_; }

private:
    std::vector<input_dimension> dims_;  // the inputs' dimensions that are the extent
    std::size_t min_ = 0, max_ = 0;
    std::vector<shape> at_max_;
    std::vector<std::optional<varying_dimension>> varying_;
    // Per instruction whose strides change with e and which is not
    // standard: how much each stride grows per unit of e (else empty).
    std::vector<std::vector<std::int64_t>> stride_steps_;
};

// An executable that runs its module at the shapes of one run (extent_plan::shapes_at).
class runs_at_extents {
public:
    virtual ~runs_at_extents() = default;
    // Empty when every instruction i with varying[i] set runs at any extent
    // of that dimension up to the compiled one; else why not, naming the
    // first instruction that cannot.
    virtual std::string cannot_vary(const std::vector<std::optional<varying_dimension>>& varying) const = 0;
    // Runs with instruction i's value of shape shapes[i]; `timings` and
    // `observe` as in executable::run_profiled / run_observed (either may be null).
    virtual std::vector<argument> run_with_shapes(const parameter_map& inputs, const std::vector<shape>& shapes,
                                                  std::vector<step_timing>* timings,
                                                  const step_observer* observe) const = 0;
};

// The executable of a program compiled once for a range: runs `inner` (a
// runs_at_extents) at each run's shapes.
class run_time_extent_executable final : public executable {
public:
    run_time_extent_executable(std::shared_ptr<const executable> inner, extent_plan plan,
                               std::map<std::string, shape> parameters);
    std::vector<argument> run(const parameter_map& inputs) const override;
    std::vector<argument> run_profiled(const parameter_map& inputs, std::vector<step_timing>& timings) const override;
    std::vector<argument> run_observed(const parameter_map& inputs, const step_observer& observe) const override;
    std::size_t planned_memory_bytes() const override { return inner_->planned_memory_bytes(); }
    std::size_t kernel_constant_bytes() const override { return inner_->kernel_constant_bytes(); }
    std::size_t adopted_constant_bytes() const override { return inner_->adopted_constant_bytes(); }
    std::vector<kernel_choice> kernel_choices() const override { return inner_->kernel_choices(); }
    // The parameters with their ranges, which run() accepts.
    const std::map<std::string, shape>& parameter_shapes() const { return parameters_; }
    const extent_plan& plan() const { return plan_; }

private:
    std::vector<argument> run_at(const parameter_map& inputs, std::vector<step_timing>* timings,
                                 const step_observer* observe) const;
    std::shared_ptr<const executable> inner_;
    const runs_at_extents* runner_;
    extent_plan plan_;
    std::map<std::string, shape> parameters_;
};

}  // namespace kiln
