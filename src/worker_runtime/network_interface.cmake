# The worker's --network-interface lookup (getifaddrs); horovodd_runtime links it.
add_library(hvdd_network_interface STATIC ${CMAKE_CURRENT_LIST_DIR}/network_interface.cc)
target_include_directories(hvdd_network_interface PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_network_interface PUBLIC absl::status absl::statusor absl::strings)
