// Measures this machine's single-precision matrix-multiply rate with oneDNN's
// dnnl_sgemm on large square matrices: the yardstick for Kiln's achieved
// GFLOP/s in the benchmark report. Prints one JSON object per size:
//   sgemm_peak --threads 2 --sizes 1024,2048,4096 --reps 10
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct options {
    int threads = 1;
    std::vector<long> sizes{1024, 2048, 4096};
    int reps = 10;
};

[[noreturn]] void usage(const std::string& problem) {
    std::cerr << "sgemm_peak: " << problem << "\nusage: sgemm_peak [--threads N] [--sizes A,B,...] [--reps R]\n";
    std::exit(2);
}

long positive(const std::string& flag, const std::string& text) {
    try {
        std::size_t used = 0;
        long v = std::stol(text, &used);
        if (used == text.size() && v > 0) return v;
    } catch (const std::exception&) {
    }
    usage(flag + " expects a positive integer, got '" + text + "'");
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        if (i + 1 >= argc) usage("missing value after " + flag);
        std::string v = argv[++i];
        if (flag == "--threads") {
            o.threads = static_cast<int>(positive(flag, v));
        } else if (flag == "--reps") {
            o.reps = static_cast<int>(positive(flag, v));
        } else if (flag == "--sizes") {
            o.sizes.clear();
            std::stringstream in(v);
            for (std::string item; std::getline(in, item, ',');) o.sizes.push_back(positive(flag, item));
        } else {
            usage("unknown option " + flag);
        }
    }
    return o;
}

// Median seconds of `reps` C = A x B products of n x n matrices, after one untimed call.
double median_seconds(long n, int reps) {
    std::vector<float> a(n * n), b(n * n), c(n * n);
    for (long i = 0; i < n * n; ++i) {
        a[i] = static_cast<float>(i % 7) * 0.25f;
        b[i] = static_cast<float>(i % 5) * 0.5f;
    }
    auto product = [&] {
        if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n) != dnnl_success) {
            std::cerr << "sgemm_peak: dnnl_sgemm failed for n = " << n << "\n";
            std::exit(1);
        }
    };
    product();
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
        auto start = std::chrono::steady_clock::now();
        product();
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    options o = parse(argc, argv);
    omp_set_num_threads(o.threads);
    for (long n : o.sizes) {
        double seconds = median_seconds(n, o.reps);
        double gflops = 2.0 * static_cast<double>(n) * n * n / seconds * 1e-9;
        std::printf("{\"library\": \"onednn\", \"threads\": %d, \"n\": %ld, \"median_s\": %.6g, \"gflops\": %.4g}\n",
                    o.threads, n, seconds, gflops);
        std::fflush(stdout);
    }
    return 0;
}
