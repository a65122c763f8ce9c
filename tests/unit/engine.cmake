# The async collective engine over in-process Gloo rings (threads on
# 127.0.0.1): fusion, negotiation by name, conflicts, resets.
hvdd_add_test(test_engine
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_collectives_harness.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_engine.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_engine_speculation.cc
  LIBS hvdd_engine)
