/* The OpenMPI peer: MPI_Allreduce in place, float32 sum, as a user who picks
 * MPI for speed on one host would call it (its shared-memory transport
 * busy-polls). bench.py builds it with mpicc and runs it under
 *   mpirun --allow-run-as-root --oversubscribe -np N bench_mpi_allreduce allreduce|small
 * Same sizes, iteration counts and RESULT lines as bench_common.h (BENCH_SIZES,
 * BENCH_ITERS and QUICK are read the same way); rank 0 prints them. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int quick(void) {
  const char* q = getenv("QUICK");
  return q != NULL && strcmp(q, "1") == 0;
}

static int iterations_for(size_t bytes) {
  const char* fixed = getenv("BENCH_ITERS");
  if (fixed != NULL && atoi(fixed) > 0) return atoi(fixed);
  const size_t budget = quick() ? (64u << 20) : (256u << 20);
  size_t n = budget / bytes;
  const size_t most = quick() ? 100 : 300;
  if (n < 3) n = 3;
  if (n > most) n = most;
  return (int)n;
}

static int sizes(size_t* out, int most) {
  const char* only = getenv("BENCH_SIZES");
  int count = 0;
  if (only != NULL && *only != '\0') {
    const char* p = only;
    while (*p != '\0' && count < most) {
      char* end = NULL;
      out[count++] = (size_t)strtoull(p, &end, 10);
      p = *end == ',' ? end + 1 : end;
    }
    return count;
  }
  for (size_t b = 4 << 10; b <= (64u << 20) && count < most; b *= 4) out[count++] = b;
  return count;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int small = argc > 1 && strcmp(argv[1], "small") == 0;
  if (!small) {
    size_t list[32];
    const int n = sizes(list, 32);
    for (int s = 0; s < n; ++s) {
      const size_t bytes = list[s];
      const size_t count = bytes / sizeof(float);
      float* data = malloc(bytes);
      for (size_t i = 0; i < count; ++i) data[i] = 1.0f;
      const int iters = iterations_for(bytes);
      const int warmups = iters / 10 > 1 ? iters / 10 : 1;
      for (int i = 0; i < warmups; ++i) {
        MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      const double per_op = (MPI_Wtime() - start) / iters;
      if (rank == 0) {
        printf("RESULT allreduce impl=mpi n=%d bytes=%zu iters=%d seconds_per_op=%.9f\n", size,
               bytes, iters, per_op);
        fflush(stdout);
      }
      free(data);
    }
  } else {
    enum { kTensors = 100, kFloats = 1024 };
    const int steps = quick() ? 20 : 100;
    float* tensors = malloc(sizeof(float) * kTensors * kFloats);
    for (int i = 0; i < kTensors * kFloats; ++i) tensors[i] = 1.0f;
    for (int step = 0; step < steps / 10 + 1; ++step) {
      for (int t = 0; t < kTensors; ++t) {
        MPI_Allreduce(MPI_IN_PLACE, tensors + t * kFloats, kFloats, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int step = 0; step < steps; ++step) {
      for (int t = 0; t < kTensors; ++t) {
        MPI_Allreduce(MPI_IN_PLACE, tensors + t * kFloats, kFloats, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      }
    }
    const double per_step = (MPI_Wtime() - start) / steps;
    if (rank == 0) {
      printf("RESULT small impl=mpi n=%d tensors=%d floats=%d steps=%d seconds_per_step=%.9f\n",
             size, kTensors, kFloats, steps, per_step);
      fflush(stdout);
    }
    free(tensors);
  }
  MPI_Finalize();
  return 0;
}
