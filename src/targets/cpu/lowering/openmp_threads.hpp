#pragma once
// The cpu target's one handling of the `threads` compile option. It is
// resolved once, when the plan is built, to a count of at least 1 that every
// kernel is built for. OpenMP's thread count is a setting of the calling
// thread, so a guard sets it to that count while the kernels are built
// (oneDNN sizes a primitive's parallel work for the count of the thread that
// creates it and keeps that count when it runs) and during each run, and
// gives the caller's own value back afterwards.
#include <omp.h>

namespace kiln {

// The option's count, or all of OpenMP's threads for 0.
inline int resolve_thread_count(int threads_option) {
    return threads_option > 0 ? threads_option : omp_get_max_threads();
}

class scoped_openmp_threads {
public:
    explicit scoped_openmp_threads(int count) : previous_(omp_get_max_threads()) {
        if (count != previous_) omp_set_num_threads(count);
    }
    ~scoped_openmp_threads() {
        if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
    }
    scoped_openmp_threads(const scoped_openmp_threads&) = delete;
    scoped_openmp_threads& operator=(const scoped_openmp_threads&) = delete;

private:
    int previous_;
};

}  // namespace kiln
