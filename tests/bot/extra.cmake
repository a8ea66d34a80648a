# Bot room extras (included from tests/CMakeLists.txt inside tgkit_room_tests(bot ...)).
# botapi-gen: its model must match the independent counter on both saved pages, and a
# generation from the previous page must succeed. The pages are Telegram's, kept outside the
# tree (TGKIT_SHARED_DIR/botapi/): without them these tests report "skipped", with the reason.
# The label needs-botapi-page is the list of tests CI's clean clone may skip (.ci/run).
find_program(TGKIT_PYTHON3 python3)
if(TGKIT_PYTHON3)
    set(_page_dir ${TGKIT_SHARED_DIR}/botapi)
    set(_need ${CMAKE_SOURCE_DIR}/tests/support/need-files.sh)
    foreach(page botapi botapi-previous)
        add_test(NAME bot/botapi_gen_counts_${page}
            COMMAND ${_need} ${_page_dir}/${page}.html ${_page_dir}/count.py --
                    ${TGKIT_PYTHON3} ${CMAKE_SOURCE_DIR}/tools/botapi-gen/check_counts.py
                    ${_page_dir}/${page}.html ${_page_dir}/count.py)
        set_tests_properties(bot/botapi_gen_counts_${page} PROPERTIES SKIP_RETURN_CODE 77
            LABELS needs-botapi-page)
    endforeach()
    add_test(NAME bot/botapi_gen_previous_page
        COMMAND ${_need} ${_page_dir}/botapi-previous.html --
                ${TGKIT_PYTHON3} ${CMAKE_SOURCE_DIR}/tools/botapi-gen/botapi_gen.py
                ${_page_dir}/botapi-previous.html
                --out-dir ${CMAKE_BINARY_DIR}/botapi-gen-previous)
    set_tests_properties(bot/botapi_gen_previous_page PROPERTIES SKIP_RETURN_CODE 77
        LABELS needs-botapi-page)
    # make regen's page lookup: BOTAPI_HTML, ../shared, a download, else what to do.
    add_test(NAME bot/botapi_page_lookup
        COMMAND sh ${CMAKE_SOURCE_DIR}/tests/bot/test_botapi_page.sh
                ${CMAKE_SOURCE_DIR}/scripts/botapi-page.sh)
endif()

# The tgbot-json test runs the built tool.
if(TARGET tgbot-json AND TARGET bot_test_gen_tgbot_json)
    add_dependencies(bot_test_gen_tgbot_json tgbot-json)
endif()

# botapi-gen's model on synthetic pages: what it must read and what it must refuse.
if(TGKIT_PYTHON3)
    add_test(NAME bot/botapi_gen_model
        COMMAND ${TGKIT_PYTHON3} ${CMAKE_SOURCE_DIR}/tools/botapi-gen/test_model.py)
endif()

# The client suite again over the lean transport (tg_transport_lean): same binaries, the
# fixture picks the transport from TGKIT_TEST_TRANSPORT. test_client_socks is curl-only (the
# lean transport refuses proxies; test_client checks that refusal in both runs).
foreach(name test_client test_client_files test_client_flood test_client_methods test_client_tls)
    if(TARGET bot_${name})
        add_test(NAME bot/${name}@lean COMMAND bot_${name})
        set_tests_properties(bot/${name}@lean PROPERTIES TIMEOUT 300
            ENVIRONMENT "TGKIT_TEST_TRANSPORT=lean")
    endif()
endforeach()

# The generated method walk of test_client_methods once more through the asynchronous client.
if(TARGET bot_test_client_methods)
    add_test(NAME bot/test_client_methods@async COMMAND bot_test_client_methods)
    set_tests_properties(bot/test_client_methods@async PROPERTIES TIMEOUT 300
        ENVIRONMENT "TGKIT_SHARED_DIR=${TGKIT_SHARED_DIR};TGKIT_TEST_TRANSPORT=async")
endif()

# The async client's loop adapters (header-only: tgbot/async_uv.h, tgbot/async_event.h), each
# with its test when the library is there; without it the test is built to fail, not skip.
pkg_check_modules(LIBUV IMPORTED_TARGET libuv)
pkg_check_modules(LIBEVENT IMPORTED_TARGET libevent)
foreach(ad uv event)
    if(TARGET bot_test_async_${ad})
        target_link_libraries(bot_test_async_${ad} PRIVATE tgbot_testing)
    endif()
endforeach()
if(TARGET bot_test_async_uv AND TARGET example_async_uv_echo)
    add_dependencies(bot_test_async_uv example_async_uv_echo)
endif()
if(TARGET bot_test_async_uv AND LIBUV_FOUND)
    target_link_libraries(bot_test_async_uv PRIVATE PkgConfig::LIBUV)
    target_compile_definitions(bot_test_async_uv PRIVATE TGKIT_HAVE_LIBUV)
endif()
if(TARGET bot_test_async_event AND LIBEVENT_FOUND)
    target_link_libraries(bot_test_async_event PRIVATE PkgConfig::LIBEVENT)
    target_compile_definitions(bot_test_async_event PRIVATE TGKIT_HAVE_LIBEVENT)
endif()

# examples/async_broadcast end to end against the tgbot-emulator program (2,000 chats).
if(TARGET bot_test_async_broadcast)
    foreach(_dep tgbot-emulator example_async_broadcast)
        if(TARGET ${_dep})
            add_dependencies(bot_test_async_broadcast ${_dep})
        endif()
    endforeach()
endif()

# The ABI guard: exported symbols of libtgbot.so match abi/libtgbot.symbols (docs/abi.md).
add_test(NAME bot/abi_symbols
    COMMAND ${CMAKE_SOURCE_DIR}/scripts/abi-symbols.sh check $<TARGET_FILE:tgbot>
            ${CMAKE_SOURCE_DIR}/abi/libtgbot.symbols)

# The tutorial quotes examples/tutorial/main.c: every C snippet must be in it verbatim.
if(TGKIT_PYTHON3)
    add_test(NAME docs/tutorial_snippets
        COMMAND ${TGKIT_PYTHON3} ${CMAKE_SOURCE_DIR}/scripts/doc-snippets.py
                ${CMAKE_SOURCE_DIR}/docs/tutorial.md ${CMAKE_SOURCE_DIR}/examples/tutorial/main.c)
endif()

# make docs: the comment filter that feeds the headers to Doxygen (never touches code, keeps
# every generated method's Bot API link).
if(TGKIT_PYTHON3)
    add_test(NAME docs/doxyfilter
        COMMAND ${TGKIT_PYTHON3} ${CMAKE_SOURCE_DIR}/tools/docs/test_doxyfilter.py)
endif()

# The dispatcher in loop mode: a whole bot on one libuv thread against the emulator.
if(TARGET bot_test_dispatch_loop)
    target_link_libraries(bot_test_dispatch_loop PRIVATE tgbot_testing)
    if(LIBUV_FOUND)
        target_link_libraries(bot_test_dispatch_loop PRIVATE PkgConfig::LIBUV)
        target_compile_definitions(bot_test_dispatch_loop PRIVATE TGKIT_HAVE_LIBUV)
    endif()
endif()

# bot/test_json_values reads numbers under a comma locale (strtod must not follow it). A
# clean machine has no de_DE.UTF-8, so this fixture makes one in the build tree with
# localedef (Debian's locales, in the Makefile's PKGS_BUILD; no root needed) and the test
# finds it through LOCPATH. Without localedef the fixture fails, and so does the test.
find_program(TGKIT_LOCALEDEF localedef)
set(TGKIT_TEST_LOCALES ${CMAKE_BINARY_DIR}/test-locales)
add_test(NAME bot/comma_locale
    COMMAND sh -c "test -f \"$1/de_DE.UTF-8/LC_NUMERIC\" && exit 0; \
[ -n \"$2\" ] || { echo 'localedef not found: install Debian package locales (make deps)'; exit 1; }; \
mkdir -p \"$1\" && \"$2\" -i de_DE -f UTF-8 \"$1/de_DE.UTF-8\""
        sh ${TGKIT_TEST_LOCALES} "${TGKIT_LOCALEDEF}")
set_tests_properties(bot/comma_locale PROPERTIES FIXTURES_SETUP comma_locale)
set_tests_properties(bot/test_json_values PROPERTIES FIXTURES_REQUIRED comma_locale
    ENVIRONMENT "LOCPATH=${TGKIT_TEST_LOCALES};LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/bot/lsan-locpath.supp")
