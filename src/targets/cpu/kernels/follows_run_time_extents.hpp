#pragma once
// A cpu kernel that reads one extent from the arguments it runs on instead
// of the shapes it was built for, so that a program compiled once at a
// range's maximum runs it at every extent of the range (ir/run_time_extents.hpp).
#include <cstddef>
#include <optional>
#include <vector>

namespace kiln {

class follows_run_time_extents {
public:
    virtual ~follows_run_time_extents() = default;
    // Whether the kernel runs correctly when dimension `dim` of its result,
    // and the same dimension of every input of the result's rank that is not
    // broadcast along it, is shorter at run time than when it was built (the
    // arguments' shapes say how long), all other extents as built.
    virtual bool follows_extent_of(std::size_t dim) const = 0;
    // Whether the kernel computes from whatever shapes its arguments have
    // (an op's reference compute), its inputs varying in any dimension as
    // the result's shape follows from them.
    virtual bool follows_any_extents() const { return false; }
    // Whether the kernel runs correctly when its result varies in dimension
    // `out` (nullopt: not at all) and input i in dimension ins[i], which
    // need not be the result's (an attention's query rows and keys), all
    // strides as built and the arguments' shapes saying how long. Asked
    // where follows_extent_of cannot answer: inputs that vary unlike the result.
    virtual bool follows_extents_in(const std::optional<std::size_t>& out,
                                    const std::vector<std::optional<std::size_t>>& ins) const {
        (void)out;
        (void)ins;
        return false;
    }
};

}  // namespace kiln
