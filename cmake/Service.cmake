# The systemd unit for tgproxy (packaging/tgproxy@.service.in) and its sysusers.d entry.
# The unit is generated at install time so that ExecStart follows the prefix actually used
# (`cmake --install build --prefix /usr` as well as the configured CMAKE_INSTALL_PREFIX).
set(TGPROXY_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING
    "Where the tgproxy systemd unit is installed (relative to the prefix, or absolute)")
set(TGPROXY_SYSUSERSDIR "lib/sysusers.d" CACHE STRING
    "Where tgproxy's sysusers.d entry is installed (relative to the prefix, or absolute)")
set(TGPROXY_CONFIG_DIR "/etc/tgproxy" CACHE PATH
    "Directory the unit reads NAME.toml from (tgproxy@NAME.service)")

# configure_file writes straight into the destination (one file per install, so parallel
# installs into different prefixes, as the tests do, never share a generated file).
if(IS_ABSOLUTE "${TGPROXY_SYSTEMD_UNITDIR}")
    set(_tgproxy_unitdir "${TGPROXY_SYSTEMD_UNITDIR}")
else()
    set(_tgproxy_unitdir "\${CMAKE_INSTALL_PREFIX}/${TGPROXY_SYSTEMD_UNITDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}")
    set(_tgproxy_bindir "${CMAKE_INSTALL_BINDIR}")
else()
    set(_tgproxy_bindir "\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}")
endif()
install(CODE "
    set(TGPROXY_CONFIG_DIR \"${TGPROXY_CONFIG_DIR}\")
    set(TGPROXY_BINDIR \"${_tgproxy_bindir}\")
    set(_unit \"\$ENV{DESTDIR}${_tgproxy_unitdir}/tgproxy@.service\")
    message(STATUS \"Installing: \${_unit}\")
    configure_file(\"${CMAKE_SOURCE_DIR}/packaging/tgproxy@.service.in\" \"\${_unit}\" @ONLY)
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${_unit}\")
")
install(FILES ${CMAKE_SOURCE_DIR}/packaging/tgproxy.sysusers
    DESTINATION ${TGPROXY_SYSUSERSDIR} RENAME tgproxy.conf)
