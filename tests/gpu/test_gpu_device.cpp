// The gpu target on a CUDA device: the plan's paths (offload on and off,
// graph replay, concurrent runs, memory released), errors from device data.
#include <thread>

#include "gpu_test_helpers.hpp"
#include "targets/gpu/gpu_target.hpp"

using namespace kiln;
using namespace kiln::test;

TEST(gpu_device, the_target_names_the_gpu) {
    const auto& t = dynamic_cast<const gpu_target&>(get_target("gpu"));
    EXPECT_TRUE(t.device().runs_cuda_kernels());
    EXPECT_NE(t.device().description().find("cuda:0"), std::string::npos) << t.device().description();
    std::cout << "device: " << t.device().description() << "\n";
}

TEST(gpu_device, small_network_matches_ref_run_after_run) {
    expect_gpu_matches_ref(small_network(2), 1e-5, "small_network");
}

TEST(gpu_device, control_flow_matches_ref) {
    program p = if_program();
    program compiled = compiled_for_gpu(p);
    for (bool c : {true, false}) {
        parameter_map inputs{{"c", literal(shape{dtype::bool_type}, std::vector<int>{c ? 1 : 0}).get_argument()},
                             {"x", make_argument(float_shape({3}), {1.5f, -2.0f, 0.25f})}};
        expect_close(compiled.eval(inputs), evaluate_module(*p.get_main_module(), inputs), 0, "if");
    }
}

TEST(gpu_device, without_offload_copy_inputs_and_outputs_stay_on_the_device) {
    const target& gpu = get_target("gpu");
    program p = small_network(3);
    program compiled = compiled_for_gpu(p, /*offload_copy=*/false);
    for (unsigned long seed : {1UL, 2UL}) {
        auto host_inputs = random_inputs(*p.get_main_module(), seed);
        parameter_map device_inputs;
        for (const auto& [name, arg] : host_inputs) device_inputs.emplace(name, gpu.copy_to(arg));
        std::vector<argument> on_host;
        for (const auto& out : compiled.eval(device_inputs)) on_host.push_back(gpu.copy_from(out));
        expect_close(on_host, evaluate_module(*p.get_main_module(), host_inputs), 1e-5, "offload_copy=false");
    }
}

TEST(gpu_device, concurrent_runs_each_use_their_own_stream) {
    program p = small_network(4);
    program compiled = compiled_for_gpu(p);
    std::vector<parameter_map> inputs;
    std::vector<std::vector<argument>> want;
    for (unsigned long seed = 0; seed < 4; ++seed) {
        inputs.push_back(random_inputs(*p.get_main_module(), 50 + seed));
        want.push_back(evaluate_module(*p.get_main_module(), inputs.back()));
    }
    std::vector<std::vector<std::vector<argument>>> got(4);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20; ++i) got[t].push_back(compiled.eval(inputs[t]));
        });
    for (auto& t : threads) t.join();
    for (std::size_t t = 0; t < 4; ++t)
        for (const auto& g : got[t]) expect_close(g, want[t], 1e-5, "thread " + std::to_string(t));
}

TEST(gpu_device, an_out_of_range_gather_index_is_an_error_naming_the_instruction) {
    program p;
    module& m = *p.get_main_module();
    auto table = add_random_literal(m, {10, 4}, 1);
    auto idx = m.add_parameter("idx", shape{dtype::int64_type, {3}});
    m.add_return({m.add_instruction(make_op("gather", value_map{{"axis", 0}}), {table, idx})});
    program compiled = compiled_for_gpu(p);
    literal good(shape{dtype::int64_type, {3}}, std::vector<std::int64_t>{0, 9, -10});
    expect_close(compiled.eval({{"idx", good.get_argument()}}), evaluate_module(m, {{"idx", good.get_argument()}}), 0,
                 "gather");
    literal bad(shape{dtype::int64_type, {3}}, std::vector<std::int64_t>{0, 10, 1});
    try {
        compiled.eval({{"idx", bad.get_argument()}});
        FAIL() << "an index of 10 into 10 rows was accepted";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("gather"), std::string::npos) << e.what();
    }
    // The program still runs after the error.
    expect_close(compiled.eval({{"idx", good.get_argument()}}), evaluate_module(m, {{"idx", good.get_argument()}}), 0,
                 "gather after an error");
}
