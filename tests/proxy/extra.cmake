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

# The control panel ([api] at /) in headless Chromium (Debian's chromium), driven by the
# emulator test's DevTools client; fails, never skips, when chromium is missing.
find_program(TGKIT_PROXY_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(TGKIT_PROXY_CHROMIUM chromium PATHS /usr/bin)
add_test(NAME proxy/panel
    COMMAND ${TGKIT_PROXY_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/proxy/panel.py
            $<TARGET_FILE:tgproxy> ${TGKIT_PROXY_CHROMIUM} ${CMAKE_BINARY_DIR}/proxy-panel.png)
set_tests_properties(proxy/panel PROPERTIES TIMEOUT 300)

# The OpenAPI document served at /v1/openapi.json, validated (openapi-spec-validator) and
# held against the real answers of every endpoint (jsonschema).
add_test(NAME proxy/openapi
    COMMAND ${TGKIT_PROXY_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/proxy/openapi.py
            $<TARGET_FILE:tgproxy>)
set_tests_properties(proxy/openapi PROPERTIES TIMEOUT 120)

# proxy/test_api makes 1,000 secrets over the API, one reload each (issue 25): minutes
# under the TSan stage of CI on a shared machine, so more than the default 300 s.
set_tests_properties(proxy/test_api PROPERTIES TIMEOUT 900)

# tgproxy loads libcurl and libmicrohttpd at first use (src/proxy/daemon/lazylib.c): the
# binary does not link them, and metrics (libmicrohttpd) and doctor's Date check (libcurl)
# work through the loader.
add_test(NAME proxy/lazylibs
    COMMAND ${TGKIT_PROXY_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/proxy/lazylibs.py
            $<TARGET_FILE:tgproxy>)
set_tests_properties(proxy/lazylibs PROPERTIES TIMEOUT 180)

# run / simple-run read OpenSSL's configuration file only when OPENSSL_CONF names one
# (src/proxy/daemon/main.c; strace shows what is opened)
add_test(NAME proxy/opensslconf
    COMMAND ${TGKIT_PROXY_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/proxy/opensslconf.py
            $<TARGET_FILE:tgproxy>)
set_tests_properties(proxy/opensslconf PROPERTIES TIMEOUT 300)
