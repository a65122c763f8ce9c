# horovodrun: the user's entry point; links the daemon to embed it.
add_executable(horovodrun ${CMAKE_CURRENT_LIST_DIR}/horovodrun_main.cc)
target_link_libraries(horovodrun PRIVATE hvdd_run_options hvdd_daemon hvdd_client_credentials)
