#pragma once
// Einsum as existing IR ops, shared by the ONNX and TensorFlow importers:
// each gives an emitter that adds instructions through its own node context.
#include <string>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/module.hpp"

namespace kiln {

class einsum_emitter {
public:
    virtual ~einsum_emitter() = default;
    virtual instruction_ref add(const std::string& name, const std::vector<instruction_ref>& inputs,
                                const value& attributes = {}) const = 0;
    virtual instruction_ref add_literal(literal lit) const = 0;
    [[noreturn]] virtual void fail(error_kind kind, const std::string& message) const = 0;
};

// The value of `equation` ("ij,jk->ik", with "..." and implicit outputs) on `inputs`.
instruction_ref lower_einsum(const einsum_emitter& out, const std::string& equation,
                             const std::vector<instruction_ref>& inputs);

// An emitter over a front end's node context (anything with add, add_literal and fail).
template <class Context>
class context_emitter final : public einsum_emitter {
public:
    explicit context_emitter(const Context& ctx) : ctx_(ctx) {}
    instruction_ref add(const std::string& name, const std::vector<instruction_ref>& inputs,
                        const value& attributes) const override {
        return ctx_.add(name, inputs, attributes);
    }
    instruction_ref add_literal(literal lit) const override { return ctx_.add_literal(std::move(lit)); }
    [[noreturn]] void fail(error_kind kind, const std::string& message) const override { ctx_.fail(kind, message); }

private:
    const Context& ctx_;
};

}  // namespace kiln
