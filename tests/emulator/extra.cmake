# Emulator room extras (included from tests/CMakeLists.txt inside tgkit_room_tests).
# Both start the built tgbot-emulator; 77 means "skipped" (a missing browser or package).
find_program(TGKIT_DEBIAN_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(TGKIT_DEBIAN_PYTHON3)
    # python-telegram-bot 13.15 (Debian) as an independent client of the emulator.
    add_test(NAME emulator/ptb_bot
        COMMAND ${TGKIT_DEBIAN_PYTHON3} -W ignore ${CMAKE_CURRENT_SOURCE_DIR}/emulator/ptb_bot.py
                $<TARGET_FILE:tgbot-emulator>)
    # The web chat in headless Chromium; the screenshot is left in the build directory.
    find_program(TGKIT_CHROMIUM chromium PATHS /usr/bin)
    add_test(NAME emulator/web_chat
        COMMAND ${TGKIT_DEBIAN_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/emulator/web_chat.py
                $<TARGET_FILE:tgbot-emulator> ${CMAKE_BINARY_DIR}/examples/echo/echo
                ${CMAKE_BINARY_DIR}/examples/inline_keyboard/inline_keyboard
                ${TGKIT_CHROMIUM} ${CMAKE_BINARY_DIR}/emulator-webchat.png)
    # --state FILE across a restart of the program.
    add_test(NAME emulator/state_restart
        COMMAND ${TGKIT_DEBIAN_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/emulator/state_restart.py
                $<TARGET_FILE:tgbot-emulator>)
    set_tests_properties(emulator/ptb_bot emulator/web_chat emulator/state_restart PROPERTIES
        TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
