#include <nanobind/nanobind.h>
#include "kiln/kiln.hpp"
NB_MODULE(_core, m) { m.attr("__version__") = kiln::version; }
