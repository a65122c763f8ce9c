# Collective benchmarks: the raw Gloo peer and our worker (run by horovodrun).
add_executable(bench_gloo_raw ${CMAKE_CURRENT_LIST_DIR}/gloo_raw.cc)
target_link_libraries(bench_gloo_raw PRIVATE gloo Threads::Threads)

add_executable(bench_hvdd_worker ${CMAKE_CURRENT_LIST_DIR}/hvdd_worker.cc)
target_link_libraries(bench_hvdd_worker PRIVATE horovodd_runtime)
