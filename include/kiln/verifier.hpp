#pragma once
#include <string>

#include "kiln/module.hpp"

namespace kiln {

// Checks that every input is defined before use, every result shape equals
// its op's compute_shape, there is exactly one return and user lists match
// inputs. Throws a kiln::error naming the offending instruction; `context`
// (for example "after pass 'dce'") is added to the message.
// A tuple value is read only by get_tuple_elem.
void verify_module(const module& m, const std::string& context = "");

class program;
// verify_module on every module, and that module arguments are modules of
// `p` other than main, none of which (indirectly) runs itself.
void verify_program(const program& p, const std::string& context = "");

}  // namespace kiln
