#include "kiln/verifier.hpp"

#include <algorithm>
#include <unordered_set>

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
        defined.insert(&ins);
    }
    if (returns != 1)
        fail(error_kind::runtime, "verifier: module '" + m.name() + "' has " + std::to_string(returns) +
                                      " returns, expected exactly one" + (context.empty() ? "" : " " + context));
}

}  // namespace kiln
