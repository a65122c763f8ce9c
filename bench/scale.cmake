# Daemon scale: horovodd's job manager and WorkerService behind a recording
# launcher (scale_daemon), and a load generator playing N workers (scale_load).
add_executable(bench_scale_daemon ${CMAKE_CURRENT_LIST_DIR}/scale_daemon.cc)
target_link_libraries(bench_scale_daemon PRIVATE hvdd_daemon)

add_executable(bench_scale_load ${CMAKE_CURRENT_LIST_DIR}/scale_load.cc)
target_link_libraries(bench_scale_load PRIVATE hvdd_proto absl::strings Threads::Threads)
