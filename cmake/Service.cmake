# The systemd unit for tgproxy (packaging/tgproxy@.service.in) and its sysusers.d entry.
# The unit is generated at install time so that ExecStart follows the prefix actually used
# (`cmake --install build --prefix /usr` as well as the configured CMAKE_INSTALL_PREFIX).
set(TGPROXY_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING
    "Where the tgproxy systemd unit is installed (relative to the prefix, or absolute)")
set(TGPROXY_SYSUSERSDIR "lib/sysusers.d" CACHE STRING
    "Where tgproxy's sysusers.d entry is installed (relative to the prefix, or absolute)")
set(TGPROXY_CONFIG_DIR "/etc/tgproxy" CACHE PATH
    "Directory the unit reads NAME.toml from (tgproxy@NAME.service)")

install(CODE "
    set(TGPROXY_CONFIG_DIR \"${TGPROXY_CONFIG_DIR}\")
    if(IS_ABSOLUTE \"${CMAKE_INSTALL_BINDIR}\")
        set(TGPROXY_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
    else()
        set(TGPROXY_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    endif()
    configure_file(\"${CMAKE_SOURCE_DIR}/packaging/tgproxy@.service.in\"
        \"${CMAKE_BINARY_DIR}/packaging/tgproxy@.service\" @ONLY)
")
install(FILES ${CMAKE_BINARY_DIR}/packaging/tgproxy@.service
    DESTINATION ${TGPROXY_SYSTEMD_UNITDIR})
install(FILES ${CMAKE_SOURCE_DIR}/packaging/tgproxy.sysusers
    DESTINATION ${TGPROXY_SYSUSERSDIR} RENAME tgproxy.conf)
