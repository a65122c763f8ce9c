// The bulk copies of the collectives (shared-memory rounds, fusion buffer).
//
// glibc's memcpy copies from about 2 KiB up to the L2 size with `rep movsb`
// on AMD CPUs. On the development VM's AMD EPYC that runs at a third of the
// speed of glibc's own vector loop for some buffer placements: the
// shared-memory allreduce with 256 KiB slots took 16 ms for 16 MiB with it
// and 5.6 ms without (GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold
// raised), and no placement was slower without it. On AMD CPUs CopyBytes
// hands memcpy blocks below that threshold, so every block takes the vector
// loop. Elsewhere it is memcpy: on an Intel Xeon (Sapphire Rapids, fast
// strings) the 2 KiB blocks were the slowest copy, `rep movsb` the fastest
// (bench_shm_allreduce, 3 interleaved runs: 2 ranks 1 MiB 277-301 us in
// blocks, 186-218 us with plain memcpy; 4 ranks 16 MiB 16.8-19.7 against
// 12.3-13.2 ms).
#pragma once

#include <cstddef>

namespace horovodd::internal {

// memcpy(to, from, bytes): the ranges must not overlap.
void CopyBytes(void* to, const void* from, size_t bytes);

}  // namespace horovodd::internal
