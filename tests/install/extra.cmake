# Install into a scratch prefix, then build consumers with pkg-config and find_package.
add_test(NAME install/consumer
    COMMAND ${CMAKE_COMMAND} -E env bash ${CMAKE_CURRENT_SOURCE_DIR}/install/consumer.sh
        ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/install "${TGKIT_SANITIZE}")
set_tests_properties(install/consumer PROPERTIES TIMEOUT 300)
