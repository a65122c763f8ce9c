# A tiny worker for the SSH tests (test_ssh.py): prints its rank layout.
add_executable(rank_probe ${CMAKE_CURRENT_LIST_DIR}/rank_probe.cc)
target_link_libraries(rank_probe PRIVATE horovodd_runtime)
set_target_properties(rank_probe PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/integration)
