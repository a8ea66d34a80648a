# Fleet room extras (included from tests/CMakeLists.txt inside tgkit_room_tests(fleet ...)):
# the shared helpers of the fleet tests, and hiredis for their Redis probes.
file(GLOB _fleet_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fleet/test_*.c)
foreach(src ${_fleet_tests})
    get_filename_component(name ${src} NAME_WE)
    target_sources(fleet_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/fleet/fleet_fx.c)
    target_link_libraries(fleet_${name} PRIVATE PkgConfig::HIREDIS)
endforeach()
