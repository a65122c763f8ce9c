# The SSH launcher's remote commands: quoting, pid handshake, group kill.
hvdd_add_test(ssh_quote_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ssh_quote.cc
  LIBS hvdd_ssh)

# The SSH launcher against a private sshd (tests/integration/sshd.py; needs root).
hvdd_add_test(ssh_launcher_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ssh_launcher.cc
  LIBS hvdd_ssh)

# The worker's --network-interface lookup.
hvdd_add_test(network_interface_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_network_interface.cc
  LIBS hvdd_network_interface)
