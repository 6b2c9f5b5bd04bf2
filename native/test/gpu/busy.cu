// A tenant for busy.sh: one-thread spin kernels of a fixed length on one stream, launched back to
// back for a number of seconds (under libvcuda the limiter holds them to the limit file's share).
// Prints the launches and the kernel's length as the GPU runs it, measured at the end with events
// around a batch of back-to-back launches (counted in the launches too).
//   busy KERNEL_US SECONDS
#include <chrono>
#include <cstdio>
#include <cstdlib>
__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
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
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const int batch = 50;
  cudaEventRecord(a, s);
  for (int i = 0; i < batch; i++, launches++) spin<<<1, 1, 0, s>>>(cycles);
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  printf("launches %lld kernel_ms %.6f (%s)\n", launches, ms / batch, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
