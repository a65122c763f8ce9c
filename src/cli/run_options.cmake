# horovodrun's flags and --config-file, turned into a JobSpec (the lead's horovodrun main links it).
add_library(hvdd_run_options STATIC
  ${CMAKE_CURRENT_LIST_DIR}/run_options.cc
  ${CMAKE_CURRENT_LIST_DIR}/client_settings.cc
  ${CMAKE_CURRENT_LIST_DIR}/config_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/remote_settings.cc)
target_include_directories(hvdd_run_options PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_run_options PUBLIC
  hvdd_proto hvdd_discovery CLI11::CLI11 yaml-cpp
  absl::status absl::statusor absl::strings)
