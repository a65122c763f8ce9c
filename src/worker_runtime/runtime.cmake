# horovodd_runtime: the library training programs link (horovodd.h,
# elastic.h): the daemon client, the daemon-backed Gloo store, the process
# runtime and the elastic run loop, on top of hvdd_collectives.
add_library(horovodd_runtime STATIC
  ${CMAKE_CURRENT_LIST_DIR}/daemon_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/daemon_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cc
  ${CMAKE_CURRENT_LIST_DIR}/ring_reaper.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine_sync.cc
  ${CMAKE_CURRENT_LIST_DIR}/elastic.cc
  ${CMAKE_CURRENT_LIST_DIR}/elastic_buffer_state.cc)
set_target_properties(horovodd_runtime PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(horovodd_runtime PUBLIC hvdd_engine hvdd_collectives hvdd_proto absl::cord
  hvdd_network_interface)
