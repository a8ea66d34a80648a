# Install into a scratch prefix, then build consumers with pkg-config and find_package.
add_test(NAME install/consumer
    COMMAND ${CMAKE_COMMAND} -E env bash ${CMAKE_CURRENT_SOURCE_DIR}/install/consumer.sh
        ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/install "${TGKIT_SANITIZE}")
set_tests_properties(install/consumer PROPERTIES TIMEOUT 300)

# The systemd unit: installed with the prefix in ExecStart, hardened, `systemd-analyze verify`.
add_test(NAME install/service
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/service.sh ${CMAKE_BINARY_DIR})
set_tests_properties(install/service PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
