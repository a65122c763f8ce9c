# Unit tests of src/discovery: parsers, diffs, the host manager, and real discovery scripts.
hvdd_add_test(test_discovery
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_discovery_parser.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_discovery_diff.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_discovery_manager.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_discovery_script.cc
  LIBS hvdd_discovery)
