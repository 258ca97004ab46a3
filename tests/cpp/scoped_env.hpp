#pragma once
// Sets an environment variable for one scope (the KILN_* variables that
// change what compile does).
#include <cstdlib>

namespace kiln::test {

class scoped_env {
public:
    scoped_env(const char* name, const char* v) : name_(name) { ::setenv(name, v, 1); }
    ~scoped_env() { ::unsetenv(name_); }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

private:
    const char* name_;
};

}  // namespace kiln::test
