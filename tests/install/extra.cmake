# Install into a scratch prefix, then build consumers with pkg-config and find_package.
add_test(NAME install/consumer
    COMMAND ${CMAKE_COMMAND} -E env bash ${CMAKE_CURRENT_SOURCE_DIR}/install/consumer.sh
        ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/install "${TGKIT_SANITIZE}")
set_tests_properties(install/consumer PROPERTIES TIMEOUT 300)

# The systemd unit: installed with the prefix in ExecStart, hardened, `systemd-analyze verify`.
add_test(NAME install/service
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/service.sh ${CMAKE_BINARY_DIR})
set_tests_properties(install/service PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)

# Man pages: installed into mandir, rendered by groff -ww and man(1) without a warning.
add_test(NAME install/man_pages
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/man.sh ${CMAKE_BINARY_DIR})
set_tests_properties(install/man_pages PROPERTIES TIMEOUT 120)
# tgproxy.toml(5) lists exactly the keys of the loader's tables (tools/man/gen_toml_man.py).
if(TARGET toml-keys)
    add_test(NAME install/man_toml_keys
        COMMAND python3 ${CMAKE_SOURCE_DIR}/tools/man/gen_toml_man.py --check
            $<TARGET_FILE:toml-keys> ${CMAKE_SOURCE_DIR}/src/proxy/config/config.c
            ${CMAKE_SOURCE_DIR}/docs/man/tgproxy.toml.5)
    set_tests_properties(install/man_toml_keys PROPERTIES TIMEOUT 60)
endif()
# The Debian packages installed, used and purged (root; packages from TGKIT_DEB_DIR, which
# `make deb-test` sets after `make deb`; skips without them, so plain ctest stays quick).
add_test(NAME install/deb COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/deb.sh)
set_tests_properties(install/deb PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
