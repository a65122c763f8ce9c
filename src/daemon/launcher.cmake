# The local process launcher: fork/exec of workers, one epoll I/O thread.
add_library(hvdd_launcher STATIC
  ${CMAKE_CURRENT_LIST_DIR}/line_splitter.cc
  ${CMAKE_CURRENT_LIST_DIR}/local_launcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/process_types.cc
  ${CMAKE_CURRENT_LIST_DIR}/spawn_process.cc)
target_include_directories(hvdd_launcher PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_launcher PUBLIC
  absl::status absl::statusor absl::strings absl::time absl::synchronization Threads::Threads)
