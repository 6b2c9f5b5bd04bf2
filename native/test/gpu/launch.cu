// Launch cost through NVIDIA's runtime: N empty kernels on one stream, timed on the host (the
// launches only, not their execution). sensor.sh runs it with and without libvcuda (core 100) to
// tell the preload's cost per launch from PyTorch's own per-op work.
//   launch [N]      (default 200000)
#include <cstdio>
#include <chrono>
__global__ void k(float *x) { if (x) x[0] += 1.0f; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200000;
  cudaStream_t s; cudaStreamCreate(&s);
  for (int i = 0; i < 1000; i++) k<<<1, 1, 0, s>>>(nullptr);
  cudaStreamSynchronize(s);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) k<<<1, 1, 0, s>>>(nullptr);
  auto t1 = std::chrono::steady_clock::now();
  cudaStreamSynchronize(s);
  double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
  printf("%.1f ns per launch (%s)\n", ns, cudaGetErrorString(cudaGetLastError()));
}
