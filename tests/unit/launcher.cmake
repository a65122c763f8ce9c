# The local launcher against real processes, and its line splitter.
hvdd_add_test(launcher_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_local_launcher.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_line_splitter.cc
  LIBS hvdd_launcher)
