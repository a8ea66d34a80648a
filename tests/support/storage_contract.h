/*
 * storage_contract: what every tg_storage must do (tgbot/storage.h), asserted on a live
 * store: absent keys, binary values, TOO_BIG with the needed length, delete, expiry, growth
 * and prefix scans. Shared by the memory, Redis and SQLite store tests so they hold every
 * store to one contract. The store should be empty of keys starting with "k", "many:" and
 * "scan" when called.
 */
#ifndef TGKIT_TEST_STORAGE_CONTRACT_H
#define TGKIT_TEST_STORAGE_CONTRACT_H

#include "tgbot/storage.h"

void tgtest_storage_contract(tg_storage *s);

#endif
