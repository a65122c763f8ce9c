# The elastic training example. The model, sampler and result file live in a
# small library so that tests/unit/test_examples.cc checks them without a job.
add_library(hvdd_example_lib STATIC
  ${CMAKE_CURRENT_LIST_DIR}/linear_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/elastic_sampler.cc
  ${CMAKE_CURRENT_LIST_DIR}/train_result.cc)
target_include_directories(hvdd_example_lib PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(hvdd_example_lib PUBLIC absl::status absl::strings)

add_executable(elastic_train
  ${CMAKE_CURRENT_LIST_DIR}/elastic_train.cc
  ${CMAKE_CURRENT_LIST_DIR}/elastic_trainer.cc)
target_link_libraries(elastic_train PRIVATE hvdd_example_lib horovodd_runtime CLI11::CLI11)
set_target_properties(elastic_train PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/examples)
