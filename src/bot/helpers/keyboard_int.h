/* keyboard_int: what keyboard.c shares with cbpack.c (the thread's keyboard error text). */
#ifndef TGKIT_BOT_HELPERS_KEYBOARD_INT_H
#define TGKIT_BOT_HELPERS_KEYBOARD_INT_H

/* Set the text tg_keyboard_errmsg() returns on this thread. */
void tg__keyboard_seterr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
