# Run by `cmake --install` (install(SCRIPT) in the top-level CMakeLists.txt),
# after HVDD_SOURCE_DIR and HVDD_BINARY_DIR are set. Installs the documented
# config and the systemd unit with the paths of the prefix being installed
# into, which is only known now (`cmake --install --prefix` can change it):
#   prefix /usr (the .deb): /etc/horovodd/horovodd.yaml, /usr/bin/horovodd,
#                           /usr/lib/systemd/system/horovodd.service;
#   any other prefix P:     P/etc/horovodd/horovodd.yaml, P/bin/horovodd,
#                           P/lib/systemd/system/horovodd.service.
# deploy/systemd/horovodd.service itself keeps the /usr/local/bin path of the
# by-hand install in deploy/systemd/README.md.

if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_hvdd_sysconf_dir "/etc")
else()
  set(_hvdd_sysconf_dir "${CMAKE_INSTALL_PREFIX}/etc")
endif()
set(_hvdd_config "${_hvdd_sysconf_dir}/horovodd/horovodd.yaml")
set(_hvdd_daemon "${CMAKE_INSTALL_PREFIX}/bin/horovodd")

file(INSTALL DESTINATION "${_hvdd_sysconf_dir}/horovodd" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${HVDD_SOURCE_DIR}/config/horovodd.yaml")

file(READ "${HVDD_SOURCE_DIR}/deploy/systemd/horovodd.service" _hvdd_unit)
foreach(_hvdd_from_to
    "/usr/local/bin/horovodd|${_hvdd_daemon}"
    "/etc/horovodd/horovodd.yaml|${_hvdd_config}")
  string(REPLACE "|" ";" _hvdd_pair "${_hvdd_from_to}")
  list(GET _hvdd_pair 0 _hvdd_from)
  list(GET _hvdd_pair 1 _hvdd_to)
  string(FIND "${_hvdd_unit}" "${_hvdd_from}" _hvdd_at)
  if(_hvdd_at EQUAL -1)
    message(FATAL_ERROR "deploy/systemd/horovodd.service no longer names ${_hvdd_from}: "
                        "update deploy/systemd/install_service.cmake")
  endif()
  string(REPLACE "${_hvdd_from}" "${_hvdd_to}" _hvdd_unit "${_hvdd_unit}")
endforeach()
set(_hvdd_rendered "${HVDD_BINARY_DIR}/deploy/systemd/horovodd.service")
file(WRITE "${_hvdd_rendered}" "${_hvdd_unit}")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${_hvdd_rendered}")
