#pragma once
// operation: a value type holding one op struct behind a small virtual
// interface. Op structs derive from op_base, declare `name()`,
// `compute_shape(inputs)`, `compute(result, inputs)` and their attributes
// through `reflect`. Control-flow ops also take modules as arguments (the
// branches of an if, the body of a loop) and override the *_with_modules
// pair of methods.
#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "kiln/argument.hpp"
#include "kiln/reflect.hpp"
#include "kiln/shape.hpp"
#include "kiln/value.hpp"

namespace kiln {

class module;
using module_ref = module*;

// Runs module argument `index` of the instruction being computed with
// `inputs` bound to the module's parameters in their order, and returns the
// module's outputs, each owned and standard-strided. Targets give one to the
// compute of ops that take modules, so each target runs submodules its own way.
using module_runner = std::function<std::vector<argument>(std::size_t index, const std::vector<argument>& inputs)>;

// The scalar float32 function of an elementwise op whose float32 result is
// float32: one of the two is set, or neither when the op has none (bool
// results, integer-only ops, ternary ops). Built from the same scalar
// functors as the op's reference compute, so fast kernels that call it
// give the reference's bits.
struct pointwise_formula {
    float (*unary)(float) = nullptr;
    float (*binary)(float, float) = nullptr;
};

// Defaults an op struct may override.
struct op_base {
    template <class Self, class F>
    static void reflect(Self&, F&&) {}
    // Index of the input whose memory the result aliases (views), or -1.
    int output_alias(const std::vector<shape>&) const { return -1; }
    // Elementwise: result element i depends only on element i of the inputs
    // broadcast numpy-style. Such an op can be a fused_pointwise step and
    // runs on the cpu target's pointwise kernel.
    bool is_pointwise() const { return false; }
    pointwise_formula float32_formula() const { return {}; }
    // For aliasing ops: the result as a view of the aliased input.
    argument compute_alias(const shape&, const std::vector<argument>&) const {
        fail(error_kind::not_implemented, "op does not produce a view");
    }
    // Control flow: the result shape given the module arguments, and the
    // compute that runs them through `run`. Ops without modules keep these.
    shape compute_shape_with_modules(const std::vector<shape>&, const std::vector<module_ref>&) const {
        fail("this op takes no module arguments");
    }
    void compute_with_modules(const argument&, const std::vector<argument>&, const module_runner&) const {
        fail(error_kind::runtime, "this op takes no module arguments");
    }
};

class operation {
public:
    operation() = default;
    template <class Op>
    operation(Op op) : self_(std::make_shared<model<Op>>(std::move(op))) {}  // NOLINT: implicit on purpose

    std::string name() const { return self().name(); }
    shape compute_shape(const std::vector<shape>& inputs) const { return self().compute_shape(inputs); }
    // With module arguments: an op that takes none accepts an empty list only.
    shape compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& modules) const {
        return modules.empty() ? self().compute_shape(inputs) : self().compute_shape_with_modules(inputs, modules);
    }
    // Writes the op's result into `result`, whose memory the caller provides.
    void compute(const argument& result, const std::vector<argument>& inputs) const { self().compute(result, inputs); }
    // compute of an op with module arguments, which it runs through `run`.
    void compute(const argument& result, const std::vector<argument>& inputs, const module_runner& run) const {
        self().compute_with_modules(result, inputs, run);
    }
    int output_alias(const std::vector<shape>& inputs) const { return self().output_alias(inputs); }
    argument compute_alias(const shape& out, const std::vector<argument>& inputs) const {
        return self().compute_alias(out, inputs);
    }
    bool is_pointwise() const { return self().is_pointwise(); }
    pointwise_formula float32_formula() const { return self().float32_formula(); }
    // Convenience for ref and constant folding: allocates the result (or makes the view).
    argument evaluate(const shape& out, const std::vector<argument>& inputs) const;
    // evaluate of an op with module arguments.
    argument evaluate(const shape& out, const std::vector<argument>& inputs, const module_runner& run) const;

    value attributes() const { return self().attributes(); }
    // A copy with the attributes named in the map `attrs` replaced.
    operation with_attributes(const value& attrs) const { return operation(self().with_attributes(attrs)); }

    template <class Op>
    const Op* get_if() const {
        auto* m = dynamic_cast<const model<Op>*>(self_.get());
        return m ? &m->op : nullptr;
    }
    bool empty() const { return self_ == nullptr; }

    friend bool operator==(const operation& a, const operation& b);
    friend bool operator!=(const operation& a, const operation& b) { return !(a == b); }
    std::size_t hash() const;

private:
    struct concept_t {
        virtual ~concept_t() = default;
        virtual std::string name() const = 0;
        virtual shape compute_shape(const std::vector<shape>& inputs) const = 0;
        virtual void compute(const argument& result, const std::vector<argument>& inputs) const = 0;
        virtual shape compute_shape_with_modules(const std::vector<shape>& inputs,
                                                 const std::vector<module_ref>& modules) const = 0;
        virtual void compute_with_modules(const argument& result, const std::vector<argument>& inputs,
                                          const module_runner& run) const = 0;
        virtual int output_alias(const std::vector<shape>& inputs) const = 0;
        virtual argument compute_alias(const shape& out, const std::vector<argument>& inputs) const = 0;
        virtual bool is_pointwise() const = 0;
        virtual pointwise_formula float32_formula() const = 0;
        virtual value attributes() const = 0;
        virtual std::shared_ptr<const concept_t> with_attributes(const value& attrs) const = 0;
    };

    template <class Op>
    struct model final : concept_t {
        explicit model(Op o) : op(std::move(o)) {}
        std::string name() const override { return op.name(); }
        shape compute_shape(const std::vector<shape>& inputs) const override { return op.compute_shape(inputs); }
        void compute(const argument& result, const std::vector<argument>& inputs) const override {
            op.compute(result, inputs);
        }
        shape compute_shape_with_modules(const std::vector<shape>& inputs,
                                         const std::vector<module_ref>& modules) const override {
            return op.compute_shape_with_modules(inputs, modules);
        }
        void compute_with_modules(const argument& result, const std::vector<argument>& inputs,
                                  const module_runner& run) const override {
            op.compute_with_modules(result, inputs, run);
        }
        int output_alias(const std::vector<shape>& inputs) const override { return op.output_alias(inputs); }
        argument compute_alias(const shape& out, const std::vector<argument>& inputs) const override {
            return op.compute_alias(out, inputs);
        }
        bool is_pointwise() const override { return op.is_pointwise(); }
        pointwise_formula float32_formula() const override { return op.float32_formula(); }
        value attributes() const override { return reflect_to_value(op); }
        std::shared_ptr<const concept_t> with_attributes(const value& attrs) const override {
            Op copy = op;
            reflect_from_value(copy, attrs, op.name());
            return std::make_shared<model<Op>>(std::move(copy));
        }
        Op op;
    };

    explicit operation(std::shared_ptr<const concept_t> s) : self_(std::move(s)) {}
    const concept_t& self() const {
        if (!self_) fail(error_kind::runtime, "use of an empty operation");
        return *self_;
    }

    std::shared_ptr<const concept_t> self_;
};

// "name" or "name[attr=value,...]"
std::string to_string(const operation& op);

}  // namespace kiln
