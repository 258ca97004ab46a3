#pragma once
// One compiled program for every extent of its dynamic dimensions: the
// program is compiled once at the ranges' maxima (memory planned for them,
// weights packed once), and each run hands every instruction its actual
// shape.
//
// The dynamic dimensions are grouped into extents: dimensions of one range
// are one extent (the batch of BERT's input_ids and attention_mask, which
// the model needs equal; a run where they differ is not this plan's), but
// two dimensions of one input never are (a batch and a sequence that share
// a range by chance are told apart by their position). extent_plan says how
// each instruction's shape follows the extents: each length is fixed or
// a * e + b for one extent e, found by running compute_shape over the
// compiled module at probes (every extent at its maximum; each one at its
// minimum and middle, the others at their maxima; all at their minima). It
// refuses (and the program keeps its cache of static specialisations)
// wherever that would not be exact: an op whose shape cannot follow the
// extents (an attribute fixed at the maximum), a length that follows two
// extents at once (a batch folded into rows), a value whose layout changes
// kind, a view whose place in its source moves, a constant whose strides do.
//
// At each extent a value is laid out as compute_shape gives it there, in
// the buffer planned for the maximum: where every dimension before the one
// varying has length 1 that is a leading part of the maximum's layout (a
// kernel may skip rows); where one is longer (a sequence at batch 4, the
// keys of a cache behind its heads) the strides change with the extent
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

// How one value follows an extent: lens[dim] = scale * e + offset, e the
// run's length of the plan's extent number `extent`.
struct varying_dimension {
    std::size_t dim = 0;
    std::int64_t scale = 0;
    std::int64_t offset = 0;
    std::size_t extent = 0;
    // Whether the stride of a dimension longer than one changes with the
    // extents (the value is then no leading part of its layout at the maximum).
    bool moves_strides = false;
};

// A dynamic dimension of an input: parameter `name`'s dimension `dim`, and
// which of the plan's extents it is.
struct input_dimension {
    std::string name;
    std::size_t dim = 0;
    std::size_t extent = 0;
};

struct extent_range {
    std::size_t min = 0;
    std::size_t max = 0;
};

// One run's length of each extent, in the plan's order.
using extent_lengths = std::vector<std::size_t>;

// The dynamic dimensions of `parameters`, each with the extent it is, and
// each extent's range in `ranges`; empty with the reason in `why` when there
// is none.
std::vector<input_dimension> extent_dimensions(const std::map<std::string, shape>& parameters,
                                               std::vector<extent_range>& ranges, std::string& why);

class extent_plan {
public:
    // The plan for `compiled` (the main module compiled at the maxima of the
    // extents of `dynamic_parameters`), or nullopt with the reason in `why`.
    // A literal follows an extent only where `literals_at_probes` holds, for
    // each of probe_extents, the module optimised there (instruction for
    // instruction the same graph as `compiled`), or null at a probe that sets
    // one extent to its minimum and the others to their maxima (there each
    // literal length is the all-minimum module's where that extent's middle
    // module shows it follows that extent, else the maximum's).
    static std::optional<extent_plan> derive(const module& compiled,
                                             const std::map<std::string, shape>& dynamic_parameters, std::string& why,
                                             const std::vector<const module*>& literals_at_probes = {});
    // The extents a plan is derived at: all at their minima first, every
    // extent at its maximum last, and between them each extent at its
    // minimum and middle with the others at their maxima (a length that is
    // a * e + b at two of them and not at a third is not), duplicates left out.
    static std::vector<extent_lengths> probe_extents(const std::vector<extent_range>& ranges);

    // Per instruction of the compiled module, in order: the dimensions it
    // varies in (none where it does not).
    const std::vector<std::vector<varying_dimension>>& varying() const { return varying_; }
    // Per instruction: the dimension it varies in, if one, for a target that
    // follows one per value (runs_at_extents::cannot_vary). A value that
    // varies in several, and every value of a plan of several extents, is
    // given with its strides moving: its kernel must take every length from
    // its arguments.
    std::vector<std::optional<varying_dimension>> varying_by_value() const;
    // The run-time extents given by `inputs` (checked against the ranges by
    // the caller); an error naming the inputs when the dimensions that are
    // one extent differ, or one is outside the plan's range.
    extent_lengths extents_of(const parameter_map& inputs) const;
    // Whether the dimensions that are one extent have one length in `lens`,
    // inside its range, for every extent.
    bool serves(const parameter_lens& lens) const;
    // The shape of every instruction at `extents`.
    std::vector<shape> shapes_at(const extent_lengths& extents) const;

private:
    std::vector<input_dimension> dims_;  // the inputs' dimensions that are the extents
    std::vector<extent_range> ranges_;
    std::vector<shape> at_max_;
    std::vector<std::vector<varying_dimension>> varying_;
    // Per instruction whose strides change with the extents and which is not
    // standard: per dimension, how much its stride grows per unit of each
    // extent (else empty).
    std::vector<std::vector<std::vector<std::int64_t>>> stride_steps_;
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
