# tests/support/proxy_harness.c calls into tgproxy_lib (config builders, server_start), and
# tgtest_support comes after tgproxy_lib on the link line: name the library once more so the
# static link resolves those references. Harmless for proxy tests that do not use it.
file(GLOB _proxy_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/proxy/*/test_*.c)
foreach(src ${_proxy_tests})
    get_filename_component(name ${src} NAME_WE)
    target_link_libraries(proxy_${name} PRIVATE tgproxy_lib)
    # the daemon tests run the built binary (daemon_fx.h): built first, never skipped
    add_dependencies(proxy_${name} tgproxy)
    add_dependencies(proxy_${name} tgproxy-fakemp) # the fake middle proxy (tools/fakemp)
endforeach()

# src/proxy's layers (wire, config, services, engine, daemon): no file includes a layer
# above its own (tests/proxy/layers.sh says which line when one does).
add_test(NAME proxy/layers COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/proxy/layers.sh
    ${CMAKE_SOURCE_DIR}/src)
