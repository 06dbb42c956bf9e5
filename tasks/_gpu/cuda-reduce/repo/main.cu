// Sum of a large float array on the GPU. This file is protected: the timing (CUDA events)
// and the check live here, so a patch to the kernel (kernel.cu) cannot print its own time. `reduce --check` compares the GPU sum with a CPU sum;
// `reduce --bench` times the kernel with CUDA events and prints the time as `kernel_ms: X`
// (the figure the harness compares) and the sum (the answer it checks against base's).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
    exit(2); } } while (0)

// In kernel.cu, the code under optimisation (compiled apart).
void launch_reduce(const float* in, double* out, size_t n);

static double gpu_sum(const float* d_in, double* d_out, size_t n, float* ms) {
    CHECK(cudaMemset(d_out, 0, sizeof(double)));
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventRecord(start));
    launch_reduce(d_in, d_out, n);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaGetLastError());
    CHECK(cudaEventElapsedTime(ms, start, stop));
    double sum = 0;
    CHECK(cudaMemcpy(&sum, d_out, sizeof(double), cudaMemcpyDeviceToHost));
    return sum;
}

int main(int argc, char** argv) {
    bool bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    size_t n = 1 << 24;
    std::vector<float> h(n);
    unsigned seed = 12345;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        h[i] = (float)((seed >> 8) & 0xffff) / 65536.0f;
    }
    float* d_in;
    double* d_out;
    CHECK(cudaMalloc(&d_in, n * sizeof(float)));
    CHECK(cudaMalloc(&d_out, sizeof(double)));
    CHECK(cudaMemcpy(d_in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    float ms = 0;
    double sum = gpu_sum(d_in, d_out, n, &ms);  // warm-up launch
    if (bench) {
        float total = 0;
        const int reps = 20;
        for (int r = 0; r < reps; r++) {
            sum = gpu_sum(d_in, d_out, n, &ms);
            total += ms;
        }
        printf("sum: %.1f\n", sum);
        printf("kernel_ms: %.6f\n", total / reps);
    } else {
        double cpu = 0;
        for (size_t i = 0; i < n; i++) cpu += h[i];
        if (fabs(cpu - sum) > 1e-6 * fabs(cpu)) {
            printf("FAIL: gpu %.3f cpu %.3f\n", sum, cpu);
            return 1;
        }
        printf("ok: %.1f\n", sum);
    }
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
