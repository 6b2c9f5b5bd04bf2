// A tenant for busy.sh: one-thread spin kernels of a fixed length on one stream, launched back to
// back for a number of seconds (under libvcuda the limiter holds them to the limit file's share).
// Prints the launches and the kernel's length as the GPU runs it, measured at the end by the GPU's
// own nanosecond timer inside a few more launches (counted in the launches too): events around a
// batch would also count the time the limiter kept the stream dry between them.
//   busy KERNEL_US SECONDS
#include <chrono>
#include <cstdio>
#include <cstdlib>
__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
__device__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The same spin, its own length in ns added to *total.
__global__ void spin_timed(long long cycles, unsigned long long *total) {
  unsigned long long g0 = globaltimer();
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  atomicAdd(total, globaltimer() - g0);
}
int main(int argc, char **argv) {
  double kernel_us = argc > 1 ? atof(argv[1]) : 200;
  double seconds = argc > 2 ? atof(argv[2]) : 3;
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  long long cycles = (long long)(kernel_us * khz / 1000.0);
  cudaStream_t s;
  cudaStreamCreate(&s);
  long long launches = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 8; i++, launches++) spin<<<1, 1, 0, s>>>(cycles);
  }
  cudaStreamSynchronize(s);
  unsigned long long *total = nullptr, ns = 0;
  cudaMalloc(&total, sizeof *total);
  cudaMemset(total, 0, sizeof *total);
  const int batch = 20;
  for (int i = 0; i < batch; i++, launches++) spin_timed<<<1, 1, 0, s>>>(cycles, total);
  cudaMemcpyAsync(&ns, total, sizeof ns, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  printf("launches %lld kernel_ms %.6f (%s)\n", launches, ns / 1e6 / batch, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
