# hvdd_discovery: host sources (script, static list, hostfile), their parsers, host diffs and
# the host manager (cooldown blacklist, drain).
add_library(hvdd_discovery STATIC
  ${CMAKE_CURRENT_LIST_DIR}/host_set.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_parser.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_diff.cc
  ${CMAKE_CURRENT_LIST_DIR}/script_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_source.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_manager.cc)
target_include_directories(hvdd_discovery PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_discovery PUBLIC
  absl::status absl::statusor absl::strings absl::time absl::synchronization
  Threads::Threads)
