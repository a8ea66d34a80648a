# Proxy benchmarks reuse the test side's fake DC, client, harness and child processes
# (tests/support/proxy_*.c), built once here without cmocka.
set(_pb_dir ${CMAKE_SOURCE_DIR}/tests/support)
add_library(tgproxy_bench_support STATIC ${_pb_dir}/proxy_util.c ${_pb_dir}/proxy_fakedc.c
    ${_pb_dir}/proxy_client.c ${_pb_dir}/proxy_front.c ${_pb_dir}/proxy_harness.c
    ${_pb_dir}/proxy_proc.c ${_pb_dir}/proxy_load.c ${_pb_dir}/doh_server.c ${_pb_dir}/tls_pki.c
    ${_pb_dir}/redis_server.c ${_pb_dir}/ports.c ${_pb_dir}/wait.c ${_pb_dir}/api_scrape.c
    ${_pb_dir}/curlbody.c)
target_include_directories(tgproxy_bench_support PUBLIC ${_pb_dir} ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(tgproxy_bench_support PUBLIC tgproxy_lib PkgConfig::CRYPTO PkgConfig::MHD
    Threads::Threads)
tgkit_flags(tgproxy_bench_support)
file(GLOB _pb_benches CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/proxy/*.c)
foreach(src ${_pb_benches})
    get_filename_component(name ${src} NAME_WE)
    target_link_libraries(bench_proxy_${name} PRIVATE tgproxy_bench_support tgproxy_lib)
endforeach()
# middle-proxy paths (pharness_opts.midproxy) run the build's fake middle proxy
target_compile_definitions(tgproxy_bench_support PRIVATE TGKIT_BINARY_DIR="${CMAKE_BINARY_DIR}")
foreach(src ${_pb_benches})
    get_filename_component(name ${src} NAME_WE)
    add_dependencies(bench_proxy_${name} tgproxy-fakemp)
endforeach()
