#include <iostream>
#include "kiln/kiln.hpp"
int main() { std::cout << kiln::version << "\n"; }
