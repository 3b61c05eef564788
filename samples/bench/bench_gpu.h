// wsync-bench's GPU rows (built where the CUDA toolkit is): see bench_gpu.cpp.
#pragma once

#include <cstdint>
#include <vector>

// Prints the GPU table and sets *min_ratio (wsync over cudaMemcpy D2D); returns 1 when there is
// no GPU (nothing measured).
int bench_gpu_rows(const std::vector<uint64_t>& sizes_gib, int repeat, double* min_ratio);

// The engine process of a GPU row: wsync-bench runs itself as `wsync-bench --gpu-engine ADDR_FILE
// TENSORS views|placed` (a fresh program: CUDA cannot be used in a forked child once the parent
// touched it). Returns the exit status.
constexpr const char* kEngineFlag = "--gpu-engine";
int bench_gpu_engine_main(int argc, char** argv);
