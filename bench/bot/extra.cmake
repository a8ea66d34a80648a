# Extra link dependencies of bot benchmarks (append one line per benchmark).
target_link_libraries(bench_bot_json_floor PRIVATE PkgConfig::CJSON PkgConfig::JANSSON_B)
target_link_libraries(bench_bot_decode PRIVATE PkgConfig::CJSON)
target_link_libraries(bench_bot_roundtrip PRIVATE PkgConfig::SSL PkgConfig::CRYPTO)
target_link_libraries(bench_bot_dispatch PRIVATE PkgConfig::CJSON)
# The fleet benchmark starts its redis-server with the tests' launcher (no cmocka in it).
target_sources(bench_bot_fleet PRIVATE ${CMAKE_SOURCE_DIR}/tests/support/redis_server.c ${CMAKE_SOURCE_DIR}/tests/support/ports.c)
target_include_directories(bench_bot_fleet PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
