# hvdd_engine: the async collective engine (queue and handles, negotiation
# with its response cache, fusion, the background thread) over any ring a
# RingRunner reaches; horovodd_runtime wires it to the worker's rings.
add_library(hvdd_engine STATIC
  ${CMAKE_CURRENT_LIST_DIR}/engine_handle.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine_request.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine_negotiation.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine_fusion.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine_speculation.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine_loop.cc)
set_target_properties(hvdd_engine PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(hvdd_engine PUBLIC hvdd_collectives)
