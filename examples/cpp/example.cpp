// Builds y = relu(x + b), compiles it for the cpu target and runs it.
#include <iostream>

#include <kiln/kiln.hpp>

int main() {
    try {
        kiln::program p;
        kiln::module* m = p.get_main_module();
        kiln::shape s{kiln::dtype::float_type, {2, 4}};
        auto x = m->add_parameter("x", s);
        auto b = m->add_literal(kiln::literal(kiln::shape{kiln::dtype::float_type, {4}},
                                              std::vector<float>{0.5f, -0.5f, 1.0f, -1.0f}));
        auto y = m->add_instruction(kiln::make_op("relu"), {m->add_instruction(kiln::make_op("add"), {x, b})});
        m->add_return({y});
        p.compile(kiln::get_target("cpu"));

        auto input = kiln::generate_argument(s, 1);
        auto outputs = p.eval({{"x", input}});
        std::cout << p << "output: " << kiln::format_values(outputs.at(0), 8) << "\n";
        // Check against the same expression evaluated by hand.
        auto in = input.to_vector<float>();
        auto out = outputs.at(0).to_vector<float>();
        const float bias[4] = {0.5f, -0.5f, 1.0f, -1.0f};
        for (std::size_t i = 0; i < in.size(); ++i) {
            float want = std::max(in[i] + bias[i % 4], 0.0f);
            if (out[i] != want) {
                std::cerr << "mismatch at " << i << ": " << out[i] << " != " << want << "\n";
                return 1;
            }
        }
        return 0;
    } catch (const kiln::error& e) {
        std::cerr << "kiln error: " << e.what() << "\n";
        return 1;
    }
}
