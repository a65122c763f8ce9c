# horovodrun's flags and --config-file.
hvdd_add_test(test_run_options
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_run_options.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_run_options_remote.cc
  LIBS hvdd_run_options)
