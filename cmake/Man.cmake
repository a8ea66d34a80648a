# Man pages (docs/man/): installed under mandir; the version is filled in at configure time.
# tgproxy.toml.5 is generated from the loader's key tables (tools/man/gen_toml_man.py, via
# the toml-keys program below) and committed; ctest proxy/man_toml_keys fails when the two
# disagree, and tests/man/render.sh renders every page with warnings as errors.
set(TGKIT_MAN_PAGES tgproxy.8 tgproxy.toml.5 tgbot-emulator.1 tgbot-json.1)
foreach(page ${TGKIT_MAN_PAGES})
    string(REGEX MATCH "[0-9]$" sec ${page})
    configure_file(${CMAKE_SOURCE_DIR}/docs/man/${page} ${CMAKE_BINARY_DIR}/man/${page} @ONLY)
    install(FILES ${CMAKE_BINARY_DIR}/man/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${sec})
endforeach()
if(TARGET tgproxy_lib AND EXISTS ${CMAKE_SOURCE_DIR}/src/proxy/config/config.c)
    add_executable(toml-keys tools/man/toml-keys.c)
    target_link_libraries(toml-keys PRIVATE tgproxy_lib)
    tgkit_flags(toml-keys)
endif()
