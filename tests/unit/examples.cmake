# The elastic example's model, sampler and result file (no job needed).
hvdd_add_test(test_examples
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_examples.cc
  LIBS hvdd_example_lib)
# Some cases run the built example to check its flags and exit codes.
add_dependencies(test_examples elastic_train)
