# A raw gRPC client for test_limits.py: oversized requests, too many streams,
# malformed job specs, and key-value writes made as a job's worker.
add_executable(limits_probe ${CMAKE_CURRENT_LIST_DIR}/limits_probe.cc)
target_link_libraries(limits_probe PRIVATE hvdd_proto absl::status absl::strings)
set_target_properties(limits_probe PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/integration)
