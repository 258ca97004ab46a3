#pragma once
// A cpu kernel that reads one extent from the arguments it runs on instead
// of the shapes it was built for, so that a program compiled once at a
// range's maximum runs it at every extent of the range (ir/run_time_extents.hpp).
#include <cstddef>

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
};

}  // namespace kiln
