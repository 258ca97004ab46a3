#pragma once
// The run contexts of one executable (an arena, scratch, prebuilt arguments,
// ...): concurrent runs each take one for themselves, and a finished run
// gives its context back for the next, so that steady-state runs allocate
// nothing.
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace kiln {

template <class Context>
class context_pool {
public:
    // A context held for one run; it goes back to the pool at the end of the
    // lease's scope, unless discarded.
    class lease {
    public:
        lease(const context_pool& pool, std::unique_ptr<Context> c) : pool_(&pool), c_(std::move(c)) {}
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        ~lease() {
            if (c_) pool_->give_back(std::move(c_));
        }
        Context& operator*() const { return *c_; }
        Context* operator->() const { return c_.get(); }
        // A context a failed run may have left inconsistent is not reused.
        void discard() { c_.reset(); }

    private:
        const context_pool* pool_;
        std::unique_ptr<Context> c_;
    };

    // A free context, or a new one from `make` (a callable returning std::unique_ptr<Context>).
    template <class Make>
    lease take(Make&& make) const {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!free_.empty()) {
                auto c = std::move(free_.back());
                free_.pop_back();
                return lease(*this, std::move(c));
            }
        }
        return lease(*this, make());
    }

    // Destroys the free contexts (before what they hold on to goes away).
    void clear() {
        std::lock_guard<std::mutex> lock(mutex_);
        free_.clear();
    }

private:
    void give_back(std::unique_ptr<Context> c) const {
        std::lock_guard<std::mutex> lock(mutex_);
        free_.push_back(std::move(c));
    }

    mutable std::mutex mutex_;
    mutable std::vector<std::unique_ptr<Context>> free_;
};

}  // namespace kiln
