# Warning and sanitizer flags, applied per target (never globally).
set(TGKIT_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wformat=2 -Wimplicit-fallthrough -Wvla -Wcast-align -Wno-unused-parameter)

set(_tgkit_san_flags "")
if(TGKIT_SANITIZE)
    string(REPLACE "," ";" _sans "${TGKIT_SANITIZE}")
    foreach(s ${_sans})
        list(APPEND _tgkit_san_flags -fsanitize=${s})
    endforeach()
    list(APPEND _tgkit_san_flags -fno-omit-frame-pointer -fno-sanitize-recover=all)
endif()

function(tgkit_link_flags tgt)
    if(_tgkit_san_flags)
        target_link_options(${tgt} PRIVATE ${_tgkit_san_flags})
    endif()
endfunction()

function(tgkit_flags tgt)
    target_compile_options(${tgt} PRIVATE ${TGKIT_WARNINGS})
    target_compile_definitions(${tgt} PRIVATE _GNU_SOURCE)
    # Runtime invariant checks (conn_check, the pool's items) in Debug and sanitizer builds;
    # release builds compile them to nothing.
    target_compile_definitions(${tgt} PRIVATE $<$<CONFIG:Debug>:TGKIT_CHECKS=1>)
    if(_tgkit_san_flags)
        target_compile_definitions(${tgt} PRIVATE TGKIT_CHECKS=1)
    endif()
    if(TGKIT_WERROR)
        target_compile_options(${tgt} PRIVATE -Werror)
    endif()
    if(TGKIT_FUZZ)
        # Coverage instrumentation for libFuzzer in every library, not just the targets.
        target_compile_options(${tgt} PRIVATE -fsanitize=fuzzer-no-link)
    endif()
    if(_tgkit_san_flags)
        target_compile_options(${tgt} PRIVATE ${_tgkit_san_flags})
        get_target_property(_type ${tgt} TYPE)
        if(NOT _type STREQUAL "OBJECT_LIBRARY" AND NOT _type STREQUAL "STATIC_LIBRARY")
            target_link_options(${tgt} PRIVATE ${_tgkit_san_flags})
        endif()
    endif()
endfunction()
