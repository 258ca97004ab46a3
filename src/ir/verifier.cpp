#include "kiln/verifier.hpp"

#include <algorithm>
#include <unordered_set>

#include "kiln/program.hpp"
#include "kiln/specialise.hpp"
#include "ir/in_place_writes.hpp"

namespace kiln {

void verify_module(const module& m, const std::string& context) {
    auto names = m.instruction_names();
    auto where = [&](const instruction& ins) {
        std::string msg = "module '" + m.name() + "', instruction " + names.at(&ins) + " (" + ins.name() + ")";
        if (!context.empty()) msg += " " + context;
        return msg;
    };
    auto bad = [&](const instruction& ins, const std::string& what) {
        fail(error_kind::runtime, "verifier: " + where(ins) + ": " + what);
    };

    std::unordered_set<const instruction*> defined;
    std::size_t returns = 0;
    for (const auto& ins : m) {
        for (const auto& in : ins.inputs()) {
            if (!defined.count(&*in)) bad(ins, "uses an input that is not defined before it");
            const auto& users = in->outputs();
            if (std::none_of(users.begin(), users.end(), [&](const auto& u) { return &*u == &ins; }))
                bad(ins, "is missing from the user list of its input " + names.at(&*in));
        }
        for (const auto& user : ins.outputs()) {
            const auto& ins_of_user = user->inputs();
            if (std::none_of(ins_of_user.begin(), ins_of_user.end(), [&](const auto& i) { return &*i == &ins; }))
                bad(ins, "lists a user that does not take it as input");
        }
        // Ranges enter a module only through its parameters.
        if (ins.get_shape().dynamic() && !ins.is_param() && !any_dynamic(ins.input_shapes()))
            bad(ins, "has the dynamic shape " + to_string(ins.get_shape()) +
                         " but is neither a parameter nor downstream of one with a dynamic shape");
        if (ins.is_return()) {
            ++returns;
        } else {
            shape expected;
            try {
                expected = ins.recompute_shape();
            } catch (const error& e) {
                bad(ins, std::string("compute_shape fails: ") + e.what());
            }
            if (expected != ins.get_shape())
                bad(ins, "result shape " + to_string(ins.get_shape()) + " differs from compute_shape " +
                             to_string(expected));
        }
        if (!ins.is_return() && writes_in_place(ins.get_operator())) {
            // Any other reader of the written input could see its new value
            // where the graph means the old one, depending on the order.
            const int alias = ins.get_operator().output_alias(ins.input_shapes());
            if (alias < 0 || static_cast<std::size_t>(alias) >= ins.inputs().size())
                bad(ins, "writes in place but aliases no input");
            const instruction& written = *ins.inputs()[static_cast<std::size_t>(alias)];
            if (written.is_literal()) bad(ins, "writes in place into the literal " + names.at(&written));
            if (written.outputs().size() != 1)
                bad(ins, "writes " + names.at(&written) + " in place, which has " +
                             std::to_string(written.outputs().size()) + " readers; it must be the only one");
        }
        if (ins.get_shape().is_tuple())
            for (const auto& user : ins.outputs())
                if (user->name() != "get_tuple_elem")
                    bad(ins, "is a tuple read by " + names.at(&*user) + " (" + user->name() +
                                 "); only get_tuple_elem reads tuples");
        defined.insert(&ins);
    }
    if (returns != 1)
        fail(error_kind::runtime, "verifier: module '" + m.name() + "' has " + std::to_string(returns) +
                                      " returns, expected exactly one" + (context.empty() ? "" : " " + context));
}

void verify_program(const program& p, const std::string& context) {
    const auto modules = p.get_modules();
    const module* main = p.get_main_module();
    const std::string suffix = context.empty() ? "" : " " + context;
    for (const module* m : modules) {
        verify_module(*m, context);
        auto names = m->instruction_names();
        for (const auto& ins : *m)
            for (const module* sub : ins.module_inputs()) {
                std::string where =
                    "verifier: module '" + m->name() + "', instruction " + names.at(&ins) + " (" + ins.name() + ")";
                if (std::find(modules.begin(), modules.end(), sub) == modules.end())
                    fail(error_kind::runtime, where + " takes a module that is not part of the program" + suffix);
                if (sub == main) fail(error_kind::runtime, where + " takes the main module as an argument" + suffix);
            }
    }
    try {
        for (const module* m : modules) (void)m->submodules();
    } catch (const error& e) {
        fail(error_kind::runtime, std::string("verifier: ") + e.what() + suffix);
    }
}

}  // namespace kiln
